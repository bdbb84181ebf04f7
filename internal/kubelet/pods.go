package kubelet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/tools/cache"
)

func labelsEverything() labels.Selector { return labels.Everything() }

// syncPod brings one pod of the node to its desired state: running, or (deleted) stopped,
// unmounted and removed with a grace-0 delete. It is idempotent.
func (k *Kubelet) syncPod(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := k.podLister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return k.cleanup(ctx, key, nil)
	}
	if err != nil {
		return err
	}
	if pod.Spec.NodeName != k.cfg.NodeName || isMirrorPod(pod) {
		return nil
	}
	k.mu.Lock()
	st := k.pods[key]
	if st != nil && st.uid != pod.UID {
		k.mu.Unlock()
		if err := k.cleanup(ctx, key, nil); err != nil { // an older pod of the same name
			return err
		}
		k.mu.Lock()
		st = nil
	}
	if st == nil {
		st = &podState{uid: pod.UID}
		k.pods[key] = st
	}
	// A terminal phase this kubelet wrote counts before the pod cache shows it.
	finished := st.written != nil && isTerminal(st.written.Phase)
	k.mu.Unlock()
	switch {
	case pod.DeletionTimestamp != nil:
		return k.terminatePod(ctx, key, pod, st)
	case isTerminal(pod.Status.Phase) || finished:
		return k.stopPod(ctx, pod, st)
	}
	if ok, reason, message := k.admit(key, pod, st); !ok {
		return k.reject(ctx, pod, reason, message)
	}
	past, wait := activeDeadline(pod, k.startTime(pod, st), time.Now())
	if past {
		return k.failDeadlineExceeded(ctx, pod, st)
	}
	if wait > 0 {
		k.queue.AddAfter(key, wait)
	}
	return k.runPod(ctx, key, pod, k.allocate(key, pod, st), st)
}

func (k *Kubelet) hostIP() string { return k.cfg.NodeIP }

// runPod sets up volumes, has the runtime bring the sandbox and containers to the spec (at
// the resources allocated to them: allocated) and reports what it sees.
func (k *Kubelet) runPod(ctx context.Context, key string, pod, allocated *corev1.Pod, st *podState) error {
	if st.ip == "" && k.cfg.Hollow {
		switch {
		case pod.Spec.HostNetwork:
			st.ip = k.hostIP()
		case k.ipam.hasCIDR():
			ip, err := k.ipam.allocate(pod.UID)
			if err != nil {
				// As a real node's CNI plugin fails the sandbox.
				k.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
				return fmt.Errorf("pod %s: %w", key, err)
			}
			st.ip = ip
		}
	}
	if err := k.volumes.setUp(ctx, pod, key); err != nil {
		var me *mountError
		if errors.As(err, &me) {
			k.recorder.Event(pod, corev1.EventTypeWarning, "FailedMount", me.Error())
		}
		if (errors.Is(err, errVolumesNotReady) || me != nil) && (pod.Status.Phase == "" || pod.Status.Phase == corev1.PodPending) {
			if werr := k.writeStatus(ctx, pod, pendingStatus(pod, k.hostIP(), metav1.Now())); werr != nil {
				return werr
			}
		}
		return err
	}
	expanded, err := k.volumes.expandInUse(ctx, pod)
	for _, e := range expanded {
		msg := fmt.Sprintf("MountVolume.NodeExpandVolume succeeded for volume %q %s", e.volume.PVName, k.cfg.NodeName)
		k.recorder.Event(pod, corev1.EventTypeNormal, ReasonFileSystemResizeSuccessful, msg)
		k.recorder.Event(e.claim, corev1.EventTypeNormal, ReasonFileSystemResizeSuccessful, msg)
	}
	// A volume that cannot grow now (the claim stays FileSystemResizePending) does not
	// hold the pod's containers back; the sync is retried for it.
	expandErr := err
	if expandErr != nil {
		k.recorder.Event(pod, corev1.EventTypeWarning, ReasonVolumeResizeFailed, "MountVolume.NodeExpandVolume failed: "+expandErr.Error())
	}
	var syncErr error
	switch {
	case !k.cfg.Hollow:
		// The runtime is the truth: every sync compares the spec with what runs.
		paths, err := k.volumes.hostPaths(pod)
		if err != nil {
			return fmt.Errorf("pod %s: %w", key, err)
		}
		if err := k.killUnhealthy(ctx, pod); err != nil {
			return err
		}
		rs, err := k.runtime.SyncPod(ctx, allocated, paths)
		st.states, st.started, syncErr = rs.Containers, rs.SandboxID != "", err
		if rs.IP != "" {
			st.ip = rs.IP
		} else if pod.Spec.HostNetwork {
			st.ip = k.hostIP()
		}
		if rs.SandboxID == "" && err != nil {
			// No sandbox yet: the pod is Pending, its containers ContainerCreating.
			if pod.Status.Phase == "" || pod.Status.Phase == corev1.PodPending {
				if werr := k.writeStatus(ctx, pod, pendingStatus(pod, k.hostIP(), metav1.Now())); werr != nil {
					return werr
				}
			}
			return fmt.Errorf("sync pod %s: %w", key, err)
		}
		st.states = k.probes.observe(key, pod, st.states)
	case !st.started:
		if adopted := adoptedStates(pod); adopted != nil {
			st.states = adopted // started by an earlier run of this kubelet
		} else {
			rs, err := k.runtime.SyncPod(ctx, allocated, nil)
			if err != nil {
				return fmt.Errorf("start pod %s: %w", key, err)
			}
			st.states = rs.Containers
			k.startedEvents(pod)
		}
		st.started = true
	}
	if k.cfg.Hollow && st.started {
		// Containers asked to exit (kubelab.dev/hollow-run-seconds) do so when due.
		var next time.Duration
		if st.states, next = hollowExits(pod, st.states, time.Now()); next > 0 {
			k.queue.AddAfter(key, next)
		}
	}
	states := withoutEphemeral(pod, st.states)
	status := k.resizeStatus(pod, allocated, st, states, syncErr, runtimeStatus(pod, states, k.hostIP(), st.ip, st.started, metav1.Now()))
	if err := k.writeStatus(ctx, pod, withEphemeralStatuses(pod, st.states, status)); err != nil {
		return err
	}
	if syncErr != nil {
		return fmt.Errorf("sync pod %s: %w", key, syncErr)
	}
	return expandErr
}

// adoptedStates rebuilds container states from a Running pod's status.
func adoptedStates(pod *corev1.Pod) []ContainerState {
	if pod.Status.Phase != corev1.PodRunning || len(pod.Status.ContainerStatuses) != len(pod.Spec.Containers) {
		return nil
	}
	var out []ContainerState
	for _, cs := range append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		s := ContainerState{Name: cs.Name, Image: cs.Image, ImageID: cs.ImageID, ContainerID: cs.ContainerID}
		switch {
		case cs.State.Running != nil:
			s.StartedAt = cs.State.Running.StartedAt.Time
		case cs.State.Terminated != nil:
			t := cs.State.Terminated
			s.Terminated, s.ExitCode, s.Reason = true, t.ExitCode, t.Reason
			s.StartedAt, s.FinishedAt = t.StartedAt.Time, t.FinishedAt.Time
		default:
			return nil
		}
		out = append(out, s)
	}
	return out
}

// stopPod stops a terminal pod's containers and releases its volumes and address.
func (k *Kubelet) stopPod(ctx context.Context, pod *corev1.Pod, st *podState) error {
	k.probes.removePod(pod.UID)
	if st.started || !k.cfg.Hollow {
		if _, err := k.runtime.KillPod(ctx, pod, 0); err != nil {
			return fmt.Errorf("stop pod %s: %w", pod.Name, err)
		}
		st.started = false
	}
	if err := k.volumes.tearDown(ctx, pod.UID); err != nil {
		return err
	}
	k.ipam.release(pod.UID)
	k.mu.Lock()
	k.retryDeferredResizesLocked(pod.Namespace + "/" + pod.Name)
	k.mu.Unlock()
	return nil
}

// terminatePod stops the containers within the grace period, unmounts, reports a terminal
// status and completes the deletion.
func (k *Kubelet) terminatePod(ctx context.Context, key string, pod *corev1.Pod, st *podState) error {
	k.probes.removePod(pod.UID)
	grace := time.Duration(0)
	if pod.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	states := st.states
	if st.started || !k.cfg.Hollow {
		if st.started && k.cfg.Hollow {
			k.killingEvents(pod) // a real runtime records its own
		}
		killed, err := k.runtime.KillPod(ctx, pod, grace)
		if err != nil {
			return fmt.Errorf("kill pod %s: %w", key, err)
		}
		if len(killed.Containers) > 0 {
			states = killed.Containers
		}
		st.started, st.states = false, states
	}
	if err := k.volumes.tearDown(ctx, pod.UID); err != nil {
		return err
	}
	k.volumes.forget(pod.UID)
	k.ipam.release(pod.UID)
	k.forgetAllocation(key, pod.UID)
	if !k.cfg.Hollow {
		if err := removePodDir(k.cfg.RootDir, pod.UID); err != nil {
			return err
		}
	}
	if len(states) > 0 && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		status := terminatedStatus(pod, withoutEphemeral(pod, states), metav1.Now())
		if err := k.writeStatus(ctx, pod, withEphemeralStatuses(pod, states, status)); err != nil {
			return err
		}
	}
	err := k.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s: %w", key, err)
	}
	return nil
}

// cleanup forgets a pod that is gone from the API (or replaced by a namesake).
func (k *Kubelet) cleanup(ctx context.Context, key string, _ *corev1.Pod) error {
	k.mu.Lock()
	st := k.pods[key]
	k.mu.Unlock()
	if st == nil {
		return nil
	}
	k.probes.removePod(st.uid)
	gone := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: st.uid}}
	if st.started || !k.cfg.Hollow {
		if _, err := k.runtime.KillPod(ctx, gone, 0); err != nil {
			return err
		}
	}
	if err := k.volumes.tearDown(ctx, st.uid); err != nil {
		return err
	}
	k.volumes.forget(st.uid)
	k.ipam.release(st.uid)
	k.forgetAllocation(key, st.uid)
	if !k.cfg.Hollow {
		if err := removePodDir(k.cfg.RootDir, st.uid); err != nil {
			return err
		}
	}
	k.mu.Lock()
	if k.pods[key] == st {
		delete(k.pods, key)
	}
	k.mu.Unlock()
	return nil
}

// forgetAllocation drops the allocation of a pod that is gone and tries again the resizes
// that waited for room on the node.
func (k *Kubelet) forgetAllocation(key string, uid types.UID) {
	if err := k.allocations.remove(uid); err != nil {
		k.log.Warn("forget pod allocation", "pod", key, "err", err)
	}
	k.mu.Lock()
	k.retryDeferredResizesLocked(key)
	k.mu.Unlock()
}

// writeStatus writes status through pods/status when it differs from the pod's, as
// upstream's status manager does: a strategic merge patch to the new status from the
// one this kubelet last wrote (the cached pod's before its first write, as the cache may
// lag its own writes), so that writes of others to the pod (labels, the scheduler's
// conditions) do not make it fail, with the pod's UID in the patch so that it cannot land
// on a new pod of the same name. The status is marked as observing the pod's generation.
func (k *Kubelet) writeStatus(ctx context.Context, pod *corev1.Pod, status corev1.PodStatus) error {
	key := pod.Namespace + "/" + pod.Name
	k.mu.Lock()
	st := k.pods[key]
	if st != nil && st.uid != pod.UID {
		st = nil
	}
	base := pod.Status
	if st != nil && st.written != nil {
		base = *st.written
	}
	k.mu.Unlock()
	observeGeneration(pod, &base, &status, metav1.Now())
	if statusEqual(&base, &status) {
		return nil
	}
	patch, err := statusPatch(pod.UID, base, status)
	if err != nil {
		return fmt.Errorf("status patch of pod %s: %w", key, err)
	}
	out, err := k.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("patch status of pod %s: %w", key, err)
	}
	if st != nil {
		k.mu.Lock()
		st.written = &out.Status
		k.mu.Unlock()
	}
	return nil
}

// statusPatch is the strategic merge patch that takes status base to status, with the
// pod's UID as a precondition.
func statusPatch(uid types.UID, base, status corev1.PodStatus) ([]byte, error) {
	before, err := json.Marshal(corev1.Pod{Status: base})
	if err != nil {
		return nil, err
	}
	after, err := json.Marshal(corev1.Pod{Status: status})
	if err != nil {
		return nil, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(before, after, corev1.Pod{})
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, err
	}
	m["metadata"] = map[string]any{"uid": uid}
	return json.Marshal(m)
}

func (k *Kubelet) startedEvents(pod *corev1.Pod) {
	if !k.cfg.PodEvents {
		return
	}
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		k.recorder.Eventf(pod, corev1.EventTypeNormal, "Pulled", "Container image %q already present on machine", c.Image)
		k.recorder.Eventf(pod, corev1.EventTypeNormal, "Created", "Created container: %s", c.Name)
		k.recorder.Eventf(pod, corev1.EventTypeNormal, "Started", "Started container %s", c.Name)
	}
}

func (k *Kubelet) killingEvents(pod *corev1.Pod) {
	if !k.cfg.PodEvents {
		return
	}
	for _, c := range pod.Spec.Containers {
		k.recorder.Eventf(pod, corev1.EventTypeNormal, "Killing", "Stopping container %s", c.Name)
	}
}

// isMirrorPod tells whether pod is a mirror pod: the API's view of a pod that runs on the
// node without the kubelet running it from the API (a static pod, or an add-on component
// that kubelab runs in its own process). The kubelet leaves such pods alone.
func isMirrorPod(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]
	return ok
}
