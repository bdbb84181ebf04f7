package kubelet

import (
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/util/podutil"
)

func ipList(ip string) (string, []corev1.PodIP) {
	if ip == "" {
		return "", nil
	}
	return ip, []corev1.PodIP{{IP: ip}}
}

func hostIPs(ip string) []corev1.HostIP {
	if ip == "" {
		return nil
	}
	return []corev1.HostIP{{IP: ip}}
}

// pendingStatus: the pod is on the node but its containers are not created yet (volumes,
// sandbox): each container waits (PodInitializing in a pod with init containers,
// ContainerCreating otherwise).
func pendingStatus(pod *corev1.Pod, hostIP string, now metav1.Time) corev1.PodStatus {
	s := *pod.Status.DeepCopy()
	s.Phase = corev1.PodPending
	s.HostIP, s.HostIPs = hostIP, hostIPs(hostIP)
	if s.StartTime == nil {
		s.StartTime = &now
	}
	s.QOSClass = podutil.ComputeQOSClass(pod)
	s.InitContainerStatuses = containerStatuses(pod, pod.Spec.InitContainers, nil, pod.Status.InitContainerStatuses, true)
	s.ContainerStatuses = containerStatuses(pod, pod.Spec.Containers, nil, pod.Status.ContainerStatuses, false)
	s.Conditions = podConditions(s.Conditions,
		ownedConditions(pod, s.Phase, s.InitContainerStatuses, s.ContainerStatuses, false, s.Conditions), now)
	return s
}

// defaultWaitingReason is why a container the runtime has not created yet waits:
// PodInitializing in a pod with init containers, ContainerCreating otherwise.
func defaultWaitingReason(pod *corev1.Pod) string {
	if len(pod.Spec.InitContainers) > 0 {
		return "PodInitializing"
	}
	return "ContainerCreating"
}

// runtimeStatus is the pod's status from its containers' states: the phase, the
// conditions, the container statuses. sandbox says whether the pod's sandbox runs.
func runtimeStatus(pod *corev1.Pod, states []ContainerState, hostIP, podIP string, sandbox bool, now metav1.Time) corev1.PodStatus {
	s := *pod.Status.DeepCopy()
	s.Phase = podPhase(pod, states)
	s.Reason, s.Message = "", ""
	s.HostIP, s.HostIPs = hostIP, hostIPs(hostIP)
	s.PodIP, s.PodIPs = ipList(podIP)
	if s.StartTime == nil {
		s.StartTime = &now
	}
	s.QOSClass = podutil.ComputeQOSClass(pod)
	s.InitContainerStatuses = containerStatuses(pod, pod.Spec.InitContainers, states, pod.Status.InitContainerStatuses, true)
	s.ContainerStatuses = containerStatuses(pod, pod.Spec.Containers, states, pod.Status.ContainerStatuses, false)
	s.Conditions = podConditions(s.Conditions,
		ownedConditions(pod, s.Phase, s.InitContainerStatuses, s.ContainerStatuses, sandbox, s.Conditions), now)
	return s
}

// runningStatus: every container started, the pod Running and Ready (hollow pods).
func runningStatus(pod *corev1.Pod, states []ContainerState, hostIP, podIP string, now metav1.Time) corev1.PodStatus {
	return runtimeStatus(pod, states, hostIP, podIP, true, now)
}

// initDone says whether every init container has completed successfully.
func initDone(pod *corev1.Pod, states []ContainerState) bool {
	byName := statesByName(states)
	for _, c := range pod.Spec.InitContainers {
		st, ok := byName[c.Name]
		switch {
		case !ok:
			return false
		case isSidecar(c):
			if st.Terminated || st.Waiting && st.LastTerminated == nil || st.Started != nil && !*st.Started {
				return false // a sidecar counts once it has started (its startup probe passed)
			}
		case !st.Terminated || st.ExitCode != 0:
			return false
		}
	}
	return true
}

// isSidecar: an init container with restartPolicy Always keeps running beside the app.
func isSidecar(c corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

func statesByName(states []ContainerState) map[string]ContainerState {
	byName := make(map[string]ContainerState, len(states))
	for _, s := range states {
		byName[s.Name] = s
	}
	return byName
}

// podPhase is the pod's phase from its containers, by upstream's rules: Pending until the
// init containers are done and every app container has run once; Running while one runs
// or will be restarted; Succeeded or Failed once all have stopped for good.
func podPhase(pod *corev1.Pod, states []ContainerState) corev1.PodPhase {
	byName := statesByName(states)
	if !initDone(pod, states) {
		if pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
			for _, c := range pod.Spec.InitContainers {
				if st, ok := byName[c.Name]; ok && st.Terminated && st.ExitCode != 0 {
					return corev1.PodFailed
				}
			}
		}
		return corev1.PodPending
	}
	var running, waiting, stopped, succeeded int
	for _, c := range pod.Spec.Containers {
		st, ok := byName[c.Name]
		switch {
		case !ok:
			waiting++
		case st.Waiting && st.LastTerminated != nil:
			stopped++ // restarting after it ran
			if st.LastTerminated.ExitCode == 0 {
				succeeded++
			}
		case st.Waiting:
			waiting++
		case st.Terminated:
			stopped++
			if st.ExitCode == 0 {
				succeeded++
			}
		default:
			running++
		}
	}
	switch {
	case waiting > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case stopped > 0:
		switch {
		case pod.Spec.RestartPolicy == corev1.RestartPolicyAlways:
			return corev1.PodRunning
		case stopped == succeeded:
			return corev1.PodSucceeded
		case pod.Spec.RestartPolicy == corev1.RestartPolicyNever:
			return corev1.PodFailed
		}
		return corev1.PodRunning
	}
	return corev1.PodPending
}

// terminatedStatus: the pod was deleted and its containers stopped; a terminal phase, as
// upstream's kubelet reports before the final delete.
func terminatedStatus(pod *corev1.Pod, states []ContainerState, now metav1.Time) corev1.PodStatus {
	s := *pod.Status.DeepCopy()
	s.Phase = corev1.PodSucceeded
	for _, st := range states {
		if st.ExitCode != 0 {
			s.Phase = corev1.PodFailed
		}
	}
	if len(states) > 0 {
		s.InitContainerStatuses = containerStatuses(pod, pod.Spec.InitContainers, states, pod.Status.InitContainerStatuses, true)
		s.ContainerStatuses = containerStatuses(pod, pod.Spec.Containers, states, pod.Status.ContainerStatuses, false)
	}
	s.Conditions = podConditions(s.Conditions,
		ownedConditions(pod, s.Phase, s.InitContainerStatuses, s.ContainerStatuses, false, s.Conditions), now)
	return s
}

// containerStatuses are the statuses of cs (the pod's init containers when init) from the
// runtime's states, in spec order, as upstream's kubelet reports them:
//   - a container the runtime does not know keeps its earlier terminated status, or
//     waits with the pod's default reason (defaultWaitingReason) keeping its earlier
//     restart count and last state;
//   - a running app container or sidecar is ready when its probes say so; a regular init
//     container is ready once it terminated with exit code 0, never while it runs.
func containerStatuses(pod *corev1.Pod, cs []corev1.Container, states []ContainerState, prev []corev1.ContainerStatus, init bool) []corev1.ContainerStatus {
	if len(cs) == 0 {
		return nil
	}
	byName := statesByName(states)
	out := make([]corev1.ContainerStatus, 0, len(cs))
	for _, c := range cs {
		st, ok := byName[c.Name]
		if !ok {
			out = append(out, unknownContainerStatus(pod, c, prev))
			continue
		}
		image := st.Image
		if image == "" {
			image = c.Image
		}
		cs := corev1.ContainerStatus{Name: c.Name, Image: image, ImageID: st.ImageID, ContainerID: st.ContainerID,
			RestartCount: st.RestartCount}
		started := !st.Terminated && !st.Waiting && (st.Started == nil || *st.Started)
		cs.Started = &started
		switch {
		case st.Waiting:
			reason := st.Reason
			if reason == "ContainerCreating" {
				reason = defaultWaitingReason(pod)
			}
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: st.Message}
		case st.Terminated:
			cs.State.Terminated = terminatedState(st)
			cs.Ready = init && !isSidecar(c) && st.ExitCode == 0
		default:
			cs.Ready = (!init || isSidecar(c)) && (st.Ready == nil || *st.Ready)
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(st.StartedAt)}
		}
		if st.LastTerminated != nil {
			cs.LastTerminationState.Terminated = terminatedState(*st.LastTerminated)
		}
		out = append(out, cs)
	}
	return out
}

// unknownContainerStatus is the status of a container the runtime holds no instance of.
func unknownContainerStatus(pod *corev1.Pod, c corev1.Container, prev []corev1.ContainerStatus) corev1.ContainerStatus {
	old, found := statusOf(prev, c.Name)
	if found && old.State.Terminated != nil {
		return old
	}
	s := corev1.ContainerStatus{Name: c.Name, Image: c.Image, Started: new(bool),
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: defaultWaitingReason(pod)}}}
	if found {
		s.RestartCount, s.LastTerminationState = old.RestartCount, old.LastTerminationState
	}
	return s
}

func terminatedState(st ContainerState) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{ExitCode: st.ExitCode, Reason: st.Reason, Message: st.Message,
		StartedAt: metav1.NewTime(st.StartedAt), FinishedAt: metav1.NewTime(st.FinishedAt), ContainerID: st.ContainerID}
}

// statusEqual ignores nothing: a write is skipped only when the status is the same.
func statusEqual(a, b *corev1.PodStatus) bool { return apiequality.Semantic.DeepEqual(a, b) }
