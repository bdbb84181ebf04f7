package kubelet

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// withEphemeralStatuses sets the status of each of the pod's ephemeral containers (in
// spec order) from the runtime's states: Running, Terminated, or Waiting with the reason
// it has not started (ContainerCreating while the runtime knows nothing of it). They
// are never ready: nothing of the pod relies on them.
func withEphemeralStatuses(pod *corev1.Pod, states []ContainerState, s corev1.PodStatus) corev1.PodStatus {
	s.EphemeralContainerStatuses = nil
	byName := statesByName(states)
	for _, ec := range pod.Spec.EphemeralContainers {
		cs := corev1.ContainerStatus{Name: ec.Name, Image: ec.Image}
		st, ok := byName[ec.Name]
		switch {
		case !ok:
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
		case st.Waiting:
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: st.Reason, Message: st.Message}
		case st.Terminated:
			cs.State.Terminated = terminatedState(st)
		default:
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(st.StartedAt)}
		}
		if ok {
			cs.ImageID, cs.ContainerID, cs.RestartCount = st.ImageID, st.ContainerID, st.RestartCount
			if st.Image != "" {
				cs.Image = st.Image
			}
		}
		s.EphemeralContainerStatuses = append(s.EphemeralContainerStatuses, cs)
	}
	return s
}

// withoutEphemeral are the states of the pod's init and app containers: an ephemeral
// container's end says nothing of how the pod ended.
func withoutEphemeral(pod *corev1.Pod, states []ContainerState) []ContainerState {
	if len(pod.Spec.EphemeralContainers) == 0 {
		return states
	}
	ephemeral := make(map[string]bool, len(pod.Spec.EphemeralContainers))
	for _, ec := range pod.Spec.EphemeralContainers {
		ephemeral[ec.Name] = true
	}
	var out []ContainerState
	for _, st := range states {
		if !ephemeral[st.Name] {
			out = append(out, st)
		}
	}
	return out
}
