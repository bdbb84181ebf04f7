package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelab/kubelab/internal/kubelet"
)

// KillPod stops the pod's containers (app containers together, then the init containers
// and sidecars in reverse order) within grace, stops and removes its sandboxes (which
// removes the containers) and returns the containers' final states. pod may carry only
// its UID. Objects that are already gone are not errors.
func (r *Runtime) KillPod(ctx context.Context, pod *corev1.Pod, grace time.Duration) (kubelet.PodStatus, error) {
	log := r.log.With("pod", pod.Namespace+"/"+pod.Name, "uid", pod.UID)
	v, err := r.observe(ctx, pod.UID)
	if err != nil {
		return kubelet.PodStatus{}, err
	}
	if err := r.stopPod(ctx, pod, v, grace); err != nil {
		return r.killedStatus(pod, v), err
	}
	final, err := r.observe(ctx, pod.UID)
	if err != nil {
		return r.killedStatus(pod, v), err
	}
	st := r.killedStatus(pod, final)
	var errs []error
	for _, sb := range final.sandboxes {
		if _, err := r.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.id}); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("remove sandbox %s of pod %s: %w", sb.id, pod.UID, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return st, err
	}
	if err := r.tearDownImageVolumes(ctx, pod.UID); err != nil {
		return st, err
	}
	if err := r.removePodCgroup(pod.UID); err != nil {
		log.Warn("remove pod cgroup", "err", err)
	}
	r.forget(pod.UID)
	if len(final.sandboxes) > 0 {
		log.Info("killed pod", "sandboxes", len(final.sandboxes))
	}
	return st, nil
}

// stopPod stops the running instances (app and ephemeral containers in parallel, then
// init containers and sidecars one by one in reverse spec order) and the ready sandboxes.
func (r *Runtime) stopPod(ctx context.Context, pod *corev1.Pod, v *podView, grace time.Duration) error {
	var apps, inits []instance
	for _, is := range v.containers {
		for _, in := range is {
			if in.state != runtimeapi.ContainerState_CONTAINER_RUNNING && in.state != runtimeapi.ContainerState_CONTAINER_UNKNOWN {
				continue
			}
			if in.ctype == typeApp || in.ctype == typeEphemeral {
				apps = append(apps, in)
			} else {
				inits = append(inits, in)
			}
		}
	}
	errs := make([]error, len(apps))
	var wg sync.WaitGroup
	for i := range apps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.stopContainer(ctx, pod, &apps[i], grace, "")
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	index := map[string]int{}
	for i, c := range pod.Spec.InitContainers {
		index[c.Name] = i + 1
	}
	sort.SliceStable(inits, func(i, j int) bool {
		if index[inits[i].name] != index[inits[j].name] {
			return index[inits[i].name] > index[inits[j].name]
		}
		return inits[i].name > inits[j].name
	})
	for i := range inits {
		if err := r.stopContainer(ctx, pod, &inits[i], grace, ""); err != nil {
			return err
		}
	}
	for _, sb := range v.sandboxes {
		if !sb.ready {
			continue
		}
		if _, err := r.rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.id}); err != nil && !isNotFound(err) {
			return fmt.Errorf("stop sandbox %s of pod %s: %w", sb.id, pod.UID, err)
		}
	}
	return nil
}

// stopContainer stops an instance within grace: its preStop hook first (when it runs and
// has one), then the runtime sends SIGTERM and, once the rest of grace is over, SIGKILL;
// with a Killing event (message, or "Stopping container <name>").
func (r *Runtime) stopContainer(ctx context.Context, pod *corev1.Pod, in *instance, grace time.Duration, message string) error {
	if message == "" {
		message = "Stopping container " + in.name
	}
	r.event(pod, in.name, corev1.EventTypeNormal, eventKilling, "%s", message)
	if spent, ran := r.preStop(ctx, pod, in, grace); ran {
		grace = max(grace-spent, minStopGrace)
	}
	timeout := int64(math.Ceil(max(grace, 0).Seconds()))
	if _, err := r.rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: in.id, Timeout: timeout}); err != nil && !isNotFound(err) {
		return fmt.Errorf("%w: stop container %s (%s): %v", ErrKillContainer, in.name, in.id, err)
	}
	return nil
}

// KillContainer stops the running container containerID ("<runtime>://<id>" or the bare
// id) of pod within grace, as stopContainer does, with a Killing event carrying message;
// the next SyncPod starts it again as the pod's restartPolicy says. An instance that is
// not running (or gone) is left alone. It implements kubelet.ContainerProber.
func (r *Runtime) KillContainer(ctx context.Context, pod *corev1.Pod, containerID string, grace time.Duration, message string) error {
	id := runtimeID(containerID)
	v, err := r.observe(ctx, pod.UID)
	if err != nil {
		return err
	}
	for _, is := range v.containers {
		for i := range is {
			if is[i].id == id && is[i].state == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return r.stopContainer(ctx, pod, &is[i], grace, message)
			}
		}
	}
	return nil
}
