package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelab/kubelab/internal/kubelet"
)

// SyncPod brings the pod's sandbox and containers to its spec and returns what then runs.
// It removes old container instances, decides (computePodActions) and acts: kills what
// must go, (re)creates the sandbox, starts the next init container(s) and the app
// containers that must run, each after its image is present and its back-off passed.
// The error joins what could not be done (wrapping ErrCrashLoopBackOff, ErrImagePull, …);
// the status still shows it as the containers' Waiting reasons.
func (r *Runtime) SyncPod(ctx context.Context, pod *corev1.Pod, volumes kubelet.PodVolumes) (kubelet.PodStatus, error) {
	log := r.log.With("pod", pod.Namespace+"/"+pod.Name, "uid", pod.UID)
	v, err := r.observe(ctx, pod.UID)
	if err != nil {
		return kubelet.PodStatus{}, err
	}
	r.collectGarbage(ctx, v, log)
	a := computePodActions(pod, v)

	var errs []error
	grace := podGracePeriod(pod)
	if a.killPod {
		if err := r.stopPod(ctx, pod, v, grace); err != nil {
			return r.podStatus(pod, v), err
		}
	} else {
		for _, k := range a.kill {
			if err := r.stopContainer(ctx, pod, &k.inst, grace, k.message); err != nil {
				return r.podStatus(pod, v), err
			}
		}
		for _, rs := range a.resize {
			if err := r.resize(ctx, pod, rs, log); err != nil {
				log.Error("resize container", "container", rs.container.Name, "err", err)
				errs = append(errs, err)
			}
		}
		r.adoptActuated(pod, v, a)
	}
	if a.purgeInit {
		r.purgeInitContainers(ctx, pod, v, log)
	}

	sandboxID, podIP, attempt := a.sandboxID, "", a.attempt
	if sb := v.readySandbox(); sb != nil && !a.createSandbox {
		podIP, attempt = sb.ip, sb.attempt
	}
	sbConfig := r.sandboxConfig(pod, attempt)
	if a.createSandbox {
		if a.sandboxChanged {
			r.event(pod, "", corev1.EventTypeNormal, eventSandboxChanged, "Pod sandbox changed, it will be killed and re-created.")
		}
		var id, ip string
		handler, err := r.runtimeHandler(ctx, pod)
		if err == nil {
			id, ip, err = r.createSandbox(ctx, sbConfig, handler)
		}
		if err != nil {
			r.event(pod, "", corev1.EventTypeWarning, eventFailedCreatePodSandBox, "Failed to create pod sandbox: %v", err)
			log.Error("create pod sandbox", "err", err)
			errs = append(errs, fmt.Errorf("%w: %v", ErrCreatePodSandbox, err))
			id = ""
		}
		sandboxID, podIP = id, ip
	}
	if sandboxID != "" {
		hostname, domain := podHostname(pod, r.cfg.ClusterDomain)
		in := containerInput{
			env:        envInput{nodeIP: r.cfg.NodeIP, podIP: podIP, allocatable: r.cfg.Allocatable, objects: r.cfg.Objects},
			hosts:      hostsInput{hostname: hostname, domain: domain, nodeHostsFile: r.nodeHostsFile},
			volumes:    volumes,
			podDir:     r.podDir(pod.UID),
			nodeMemory: r.cfg.Allocatable.Memory().Value(),
		}
		if len(a.startInit)+len(a.start)+len(a.startEphemeral) > 0 {
			in.imageVolumes = r.setUpImageVolumes(ctx, pod, sbConfig)
			in.volumes = withImageVolumes(volumes, in.imageVolumes)
		}
		for _, s := range a.startInit {
			if err := r.startContainer(ctx, pod, sandboxID, sbConfig, s, in, log); err != nil {
				errs = append(errs, err)
				if s.ctype != typeSidecar {
					break // the next init container waits for this one
				}
			}
		}
		for _, s := range a.start {
			if err := r.startContainer(ctx, pod, sandboxID, sbConfig, s, in, log); err != nil {
				errs = append(errs, err)
			}
		}
		for _, s := range a.startEphemeral {
			if a.killPod {
				break
			}
			if err := r.startContainer(ctx, pod, sandboxID, sbConfig, s, in, log); err != nil {
				errs = append(errs, err)
			}
		}
	}
	after, err := r.observe(ctx, pod.UID)
	if err != nil {
		return r.podStatus(pod, v), errors.Join(append(errs, err)...)
	}
	return r.podStatus(pod, after), errors.Join(errs...)
}

// podGracePeriod is how long the pod's containers get to stop: its deletion grace period
// when it is being deleted, else terminationGracePeriodSeconds (30 s by default).
func podGracePeriod(pod *corev1.Pod) time.Duration {
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

// startContainer waits out the container's restart back-off, makes its image present,
// and creates and starts a new instance in the sandbox. Failures are recorded as the
// container's waiting reason and as events.
func (r *Runtime) startContainer(ctx context.Context, pod *corev1.Pod, sandboxID string, sbConfig *runtimeapi.PodSandboxConfig,
	s startAction, in containerInput, log *slog.Logger) error {
	c := s.container
	fail := func(reason, message string, sentinel error) error {
		r.setReason(pod.UID, c.Name, reason, message)
		return fmt.Errorf("container %s: %w: %s", c.Name, sentinel, message)
	}
	if s.last != nil && !s.noBackOff {
		key := fmt.Sprintf("%s/%s/%s", pod.UID, c.Name, containerHash(c))
		if waiting, delay := r.crashBackOff.inBackOffSince(key, s.last.finishedAt); waiting {
			r.event(pod, c.Name, corev1.EventTypeWarning, eventBackOff, "Back-off restarting failed container %s in pod %s", c.Name, podFullName(pod))
			msg := fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", delay, c.Name, podFullName(pod))
			return fail(ErrCrashLoopBackOff.Error(), msg, ErrCrashLoopBackOff)
		}
		r.crashBackOff.next(key, s.last.finishedAt, "")
	}
	if ir := imageVolumeFailure(c, in.imageVolumes); ir != nil {
		r.event(pod, c.Name, corev1.EventTypeWarning, eventFailed, "%s", imageVolumeEvent(ir))
		return fail(ir.reason, ir.message, ir.err)
	}
	imageRef, ir := r.ensureImage(ctx, pod, containerImage(c), sbConfig)
	if ir != nil {
		r.event(pod, c.Name, corev1.EventTypeWarning, eventFailed, "Error: %s", ir.reason)
		return fail(ir.reason, ir.message, ir.err)
	}
	in.ctype, in.restartCount, in.imageRef = s.ctype, s.attempt, imageRef
	cfg, err := containerConfig(pod, c, in)
	if err == nil && s.target != "" && s.targetID == "" {
		err = errTargetNotRunning(s.target)
	}
	var ime *imageMountError
	if errors.As(err, &ime) {
		r.event(pod, c.Name, corev1.EventTypeWarning, eventFailed, "Error: %v", err)
		return fail(ErrCreateContainer.Error(), err.Error(), ErrCreateContainer)
	}
	if err != nil {
		r.event(pod, c.Name, corev1.EventTypeWarning, eventFailed, "Error: %v", err)
		return fail(ErrCreateContainerConfig.Error(), err.Error(), ErrCreateContainerConfig)
	}
	sharePIDNamespace(cfg, s.targetID)
	resp, err := r.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxID, Config: cfg, SandboxConfig: sbConfig})
	if err != nil {
		msg := grpcMessage(err)
		r.event(pod, c.Name, corev1.EventTypeWarning, eventFailed, "Error: %s", msg)
		return fail(ErrCreateContainer.Error(), msg, ErrCreateContainer)
	}
	r.event(pod, c.Name, corev1.EventTypeNormal, eventCreated, "Created container: %s", c.Name)
	if _, err := r.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: resp.GetContainerId()}); err != nil {
		msg := grpcMessage(err)
		r.event(pod, c.Name, corev1.EventTypeWarning, eventFailed, "Error: %s", msg)
		return fail(ErrRunContainer.Error(), msg, ErrRunContainer)
	}
	r.event(pod, c.Name, corev1.EventTypeNormal, eventStarted, "Started container %s", c.Name)
	r.setActuated(pod.UID, c.Name, resp.GetContainerId(), c.Resources, cfg.GetLinux().GetResources())
	if msg, err := r.postStart(ctx, pod, c, resp.GetContainerId(), log); err != nil {
		return fail(ErrPostStartHook.Error(), msg, ErrPostStartHook)
	}
	r.clearReason(pod.UID, c.Name)
	log.Info("started container", "container", c.Name, "id", resp.GetContainerId(), "restartCount", s.attempt)
	return nil
}

// collectGarbage removes the instances and sandboxes gcActions picks, and drops them from
// the view.
func (r *Runtime) collectGarbage(ctx context.Context, v *podView, log *slog.Logger) {
	cs, sbs := gcActions(v)
	gone := map[string]bool{}
	for _, in := range cs {
		if _, err := r.rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: in.id}); err != nil && !isNotFound(err) {
			log.Warn("remove old container", "container", in.name, "id", in.id, "err", err)
			continue
		}
		gone[in.id] = true
	}
	for _, id := range sbs {
		if _, err := r.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil && !isNotFound(err) {
			log.Warn("remove old sandbox", "sandbox", id, "err", err)
			continue
		}
		gone[id] = true
	}
	dropFromView(v, gone)
}

// purgeInitContainers removes every instance of the pod's init containers: they run again
// in the new sandbox.
func (r *Runtime) purgeInitContainers(ctx context.Context, pod *corev1.Pod, v *podView, log *slog.Logger) {
	gone := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		for _, in := range v.containers[c.Name] {
			if _, err := r.rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: in.id}); err != nil && !isNotFound(err) {
				log.Warn("remove init container", "container", in.name, "id", in.id, "err", err)
				continue
			}
			gone[in.id] = true
		}
	}
	dropFromView(v, gone)
}

func dropFromView(v *podView, gone map[string]bool) {
	if len(gone) == 0 {
		return
	}
	for name, is := range v.containers {
		kept := is[:0]
		for _, in := range is {
			if !gone[in.id] {
				kept = append(kept, in)
			}
		}
		if len(kept) == 0 {
			delete(v.containers, name)
		} else {
			v.containers[name] = kept
		}
	}
	sbs := v.sandboxes[:0]
	for _, s := range v.sandboxes {
		if !gone[s.id] {
			sbs = append(sbs, s)
		}
	}
	v.sandboxes = sbs
}
