package kubelet

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// resizeRetry is how long a deferred resize waits before it is tried again (a pod of the
// node leaving, or giving up resources, tries it again at once).
const resizeRetry = 30 * time.Second

// The reasons of the resize events, as upstream's kubelet records them.
const (
	reasonResizeStarted    = "ResizeStarted"
	reasonResizeCompleted  = "ResizeCompleted"
	reasonResizeDeferred   = "ResizeDeferred"
	reasonResizeInfeasible = "ResizeInfeasible"
	reasonResizeError      = "ResizeError"
)

// Cgroup settings below which two cpu values are the same setting: the smallest cpu
// limit a CFS quota expresses, the smallest cpu request cpu shares express.
const (
	minMilliCPULimit   = 10
	minMilliCPURequest = 2
)

// resizeFit says whether the node can give pod the resources its spec asks for, next to
// others (the node's other active pods, at the resources allocated to them), as
// upstream's kubelet decides a resize: Infeasible when the pod alone asks for more cpu or
// memory than the node's allocatable; Deferred when the others leave it too little, with
// the message of the kubelet's admission.
func resizeFit(pod *corev1.Pod, others []*corev1.Pod, allocatable corev1.ResourceList) (fit bool, reason, message string) {
	want := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	cpu, mem := want.Cpu().MilliValue(), want.Memory().Value()
	capCPU, capMem := allocatable.Cpu().MilliValue(), allocatable.Memory().Value()
	switch {
	case mem > capMem:
		return false, corev1.PodReasonInfeasible, fmt.Sprintf("Node didn't have enough capacity: memory, requested: %d, capacity: %d", mem, capMem)
	case cpu > capCPU:
		return false, corev1.PodReasonInfeasible, fmt.Sprintf("Node didn't have enough capacity: cpu, requested: %d, capacity: %d", cpu, capCPU)
	}
	var usedCPU, usedMem int64
	for _, o := range others {
		r := resourcehelper.PodRequests(o, resourcehelper.PodResourcesOptions{})
		usedCPU += r.Cpu().MilliValue()
		usedMem += r.Memory().Value()
	}
	switch {
	case cpu > 0 && usedCPU+cpu > capCPU:
		return false, corev1.PodReasonDeferred, fmt.Sprintf("Node didn't have enough resource: cpu, requested: %d, used: %d, capacity: %d", cpu, usedCPU, capCPU)
	case mem > 0 && usedMem+mem > capMem:
		return false, corev1.PodReasonDeferred, fmt.Sprintf("Node didn't have enough resource: memory, requested: %d, used: %d, capacity: %d", mem, usedMem, capMem)
	}
	return true, "", ""
}

// resizeCondition is the kubelet's resize condition of type t (PodResizePending,
// PodResizeInProgress) with reason and message, observing generation; its transition
// time stays prev's when prev had the same reason.
func resizeCondition(t corev1.PodConditionType, prev *corev1.PodCondition, reason, message string, generation int64, now metav1.Time) *corev1.PodCondition {
	c := &corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message,
		ObservedGeneration: generation, LastProbeTime: now, LastTransitionTime: now}
	if prev != nil && prev.Reason == reason {
		c.LastTransitionTime = prev.LastTransitionTime
		if prev.Message == message {
			c.LastProbeTime = prev.LastProbeTime
		}
	}
	return c
}

// withResizeConditions puts the kubelet's resize conditions (nil: it does not hold) in
// place of the ones of those types in conds.
func withResizeConditions(conds []corev1.PodCondition, pending, inProgress *corev1.PodCondition) []corev1.PodCondition {
	out := make([]corev1.PodCondition, 0, len(conds)+2)
	for _, c := range conds {
		if c.Type != corev1.PodResizePending && c.Type != corev1.PodResizeInProgress {
			out = append(out, c)
		}
	}
	for _, c := range []*corev1.PodCondition{pending, inProgress} {
		if c != nil {
			out = append(out, *c)
		}
	}
	return out
}

// resizeInProgress says whether a running container of the pod (at its allocated
// resources) does not run with them yet: the cpu or memory last applied to it, as the
// runtime says, are others.
func resizeInProgress(allocated *corev1.Pod, states []ContainerState) bool {
	byName := statesByName(states)
	for _, cs := range [][]corev1.Container{allocated.Spec.InitContainers, allocated.Spec.Containers} {
		for _, c := range cs {
			st, ok := byName[c.Name]
			if !ok || st.Waiting || st.Terminated || st.Actuated == nil {
				continue
			}
			if !sameCPUMemory(&c.Resources, st.Actuated) {
				return true
			}
		}
	}
	return false
}

// sameCPUMemory says whether a and b request and limit the same cpu and memory.
func sameCPUMemory(a, b *corev1.ResourceRequirements) bool {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if !a.Requests[name].Equal(b.Requests[name]) || !a.Limits[name].Equal(b.Limits[name]) {
			return false
		}
	}
	return true
}

// withContainerResources sets, on the statuses of the containers the runtime knows,
// allocatedResources (the requests allocated to the container) and resources, as
// upstream's kubelet reports them: those allocated, and for a running container the cpu
// request, cpu limit and memory limit its cgroup has (as the runtime reports them, or as
// they were applied) where the allocation has requests or limits; a cpu value that is the
// same cgroup setting as the allocated one (both at or below the smallest one) stays the
// allocated one.
func withContainerResources(statuses []corev1.ContainerStatus, allocated []corev1.Container, states []ContainerState) {
	byName := statesByName(states)
	for i := range statuses {
		s := &statuses[i]
		st, ok := byName[s.Name]
		if !ok {
			continue
		}
		var c *corev1.Container
		for j := range allocated {
			if allocated[j].Name == s.Name {
				c = &allocated[j]
			}
		}
		if c == nil {
			continue
		}
		r := c.Resources.DeepCopy()
		s.AllocatedResources = r.Requests.DeepCopy()
		if run := st.Resources; run != nil && !st.Waiting && !st.Terminated {
			if r.Limits != nil {
				if q := run.CPULimit; q != nil && (q.MilliValue() > minMilliCPULimit || r.Limits.Cpu().MilliValue() > minMilliCPULimit) {
					r.Limits[corev1.ResourceCPU] = q.DeepCopy()
				}
				if q := run.MemoryLimit; q != nil {
					r.Limits[corev1.ResourceMemory] = q.DeepCopy()
				}
			}
			if r.Requests != nil {
				if q := run.CPURequest; q != nil && (q.MilliValue() > minMilliCPURequest || r.Requests.Cpu().MilliValue() > minMilliCPURequest) {
					r.Requests[corev1.ResourceCPU] = q.DeepCopy()
				}
			}
		}
		s.Resources = r
	}
}

// resizeEventMessage is the message of a resize event: what happened, then the
// containers' resources and the pod's generation (and the error) as JSON, as upstream's
// kubelet writes it.
func resizeEventMessage(what string, pod *corev1.Pod, generation int64, errMsg string) string {
	type container struct {
		Name      string                      `json:"name"`
		Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	}
	summary := struct {
		InitContainers []container `json:"initContainers,omitempty"`
		Containers     []container `json:"containers,omitempty"`
		Generation     int64       `json:"generation"`
		Error          string      `json:"error,omitempty"`
	}{Generation: generation, Error: errMsg}
	for _, c := range pod.Spec.InitContainers {
		summary.InitContainers = append(summary.InitContainers, container{c.Name, c.Resources})
	}
	for _, c := range pod.Spec.Containers {
		summary.Containers = append(summary.Containers, container{c.Name, c.Resources})
	}
	b, err := json.Marshal(summary)
	if err != nil {
		return what
	}
	return what + ": " + string(b)
}

// allocate is the pod as the node runs it: its spec with the resources the kubelet
// allocated. A pod met for the first time is allocated its spec's resources. When its
// spec asks for others (a resize), the kubelet takes them if the node has room for them
// next to its other pods (resizeFit) and starts the resize (PodResizeInProgress until the
// runtime applied them); else the pod keeps what it had and its resize is pending
// (PodResizePending: Deferred, tried again later, or Infeasible). A spec back at the
// allocation ends a pending resize.
func (k *Kubelet) allocate(key string, pod *corev1.Pod, st *podState) *corev1.Pod {
	k.allocMu.Lock()
	defer k.allocMu.Unlock()
	alloc, ok := k.allocations.get(pod.UID)
	if !ok {
		if err := k.allocations.set(pod); err != nil {
			k.log.Error("record pod allocation", "pod", key, "err", err)
		}
		return pod
	}
	allocated, changed := withAllocation(pod, alloc)
	now := metav1.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if !changed {
		st.resizePending = nil
		return pod
	}
	fit, reason, message := resizeFit(pod, k.otherAllocatedPods(pod), k.cfg.Capacity)
	if fit {
		if err := k.allocations.set(pod); err != nil {
			k.log.Error("record pod allocation", "pod", key, "err", err)
			return allocated
		}
		st.resizePending = nil
		st.resizeInProgress = resizeCondition(corev1.PodResizeInProgress, nil, "", "", pod.Generation, now)
		k.recorder.Event(pod, corev1.EventTypeNormal, reasonResizeStarted, resizeEventMessage("Pod resize started", pod, pod.Generation, ""))
		if shrinks(allocated, pod) {
			k.retryDeferredResizesLocked(key)
		}
		return pod
	}
	prev := st.resizePending
	st.resizePending = resizeCondition(corev1.PodResizePending, prev, reason, message, pod.Generation, now)
	if prev == nil || prev.Reason != reason || prev.ObservedGeneration != pod.Generation {
		event := reasonResizeDeferred
		if reason == corev1.PodReasonInfeasible {
			event = reasonResizeInfeasible
		}
		k.recorder.Event(pod, corev1.EventTypeWarning, event, resizeEventMessage("Pod resize "+reason, pod, pod.Generation, message))
	}
	if reason == corev1.PodReasonDeferred {
		k.queue.AddAfter(key, resizeRetry)
	}
	return allocated
}

// shrinks says whether pod requests less cpu or memory than it did (was).
func shrinks(was, pod *corev1.Pod) bool {
	a := resourcehelper.PodRequests(was, resourcehelper.PodResourcesOptions{})
	b := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return b.Cpu().Cmp(*a.Cpu()) < 0 || b.Memory().Cmp(*a.Memory()) < 0
}

// otherAllocatedPods are the node's active pods but pod, at their allocated resources:
// those the kubelet allocated to and that have not finished. k.mu is held.
func (k *Kubelet) otherAllocatedPods(pod *corev1.Pod) []*corev1.Pod {
	pods, err := k.podLister.List(labelsEverything())
	if err != nil {
		return nil
	}
	var out []*corev1.Pod
	for _, p := range pods {
		if p.UID == pod.UID || p.Spec.NodeName != k.cfg.NodeName || isMirrorPod(p) || isTerminal(p.Status.Phase) {
			continue
		}
		if st := k.pods[p.Namespace+"/"+p.Name]; st != nil && st.uid == p.UID && st.written != nil && isTerminal(st.written.Phase) {
			continue
		}
		alloc, ok := k.allocations.get(p.UID)
		if !ok {
			continue
		}
		allocated, _ := withAllocation(p, alloc)
		out = append(out, allocated)
	}
	return out
}

// retryDeferredResizes syncs again the pods whose resize waits for room on the node (a pod
// left it, or gave up resources), but the one of key. k.mu is held.
func (k *Kubelet) retryDeferredResizesLocked(key string) {
	for other, st := range k.pods {
		if other != key && st.resizePending != nil && st.resizePending.Reason == corev1.PodReasonDeferred {
			k.queue.Add(other)
		}
	}
}

// resizeStatus is the pod's status with what the kubelet reports of its resources: each
// known container's allocatedResources and resources (withContainerResources), and the
// resize conditions. The runtime's sync (syncErr) and states (after it) say whether a
// started resize is done: the condition PodResizeInProgress goes, with a ResizeCompleted
// event, once every running container runs with its allocated resources; a ResizeError of
// the runtime keeps it, with the reason Error and the runtime's message.
func (k *Kubelet) resizeStatus(pod, allocated *corev1.Pod, st *podState, states []ContainerState, syncErr error, status corev1.PodStatus) corev1.PodStatus {
	withContainerResources(status.InitContainerStatuses, allocated.Spec.InitContainers, states)
	withContainerResources(status.ContainerStatuses, allocated.Spec.Containers, states)
	now := metav1.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	var re *ResizeError
	switch {
	case errors.As(syncErr, &re):
		prev := st.resizeInProgress
		gen := pod.Generation
		if prev != nil {
			gen = prev.ObservedGeneration
		}
		st.resizeInProgress = resizeCondition(corev1.PodResizeInProgress, prev, corev1.PodReasonError, re.Message, gen, now)
		if prev == nil || prev.Reason != corev1.PodReasonError || prev.Message != re.Message {
			k.recorder.Event(pod, corev1.EventTypeWarning, reasonResizeError, resizeEventMessage("Pod resize error", allocated, gen, re.Message))
		}
	case resizeInProgress(allocated, states):
		if st.resizeInProgress == nil {
			st.resizeInProgress = resizeCondition(corev1.PodResizeInProgress, nil, "", "", pod.Generation, now)
		}
	case st.resizeInProgress != nil:
		k.recorder.Event(pod, corev1.EventTypeNormal, reasonResizeCompleted,
			resizeEventMessage("Pod resize completed", allocated, st.resizeInProgress.ObservedGeneration, ""))
		st.resizeInProgress = nil
	}
	status.Conditions = withResizeConditions(status.Conditions, st.resizePending, st.resizeInProgress)
	return status
}
