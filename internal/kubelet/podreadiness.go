package kubelet

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// reasonContainersNotReady is the reason of the Ready and ContainersReady conditions of
// a pod whose containers are not all ready.
const reasonContainersNotReady = "ContainersNotReady"

// unreadyMessage explains a pod's Ready and ContainersReady conditions that are False
// for its containers, as upstream's kubelet does: "containers with unready status: [a
// b]" naming, in the spec's order, its sidecars (restartable init containers) and app
// containers that are not ready, and first "containers with unknown status: [...]" for
// those the status lacks. A message already set is kept.
func unreadyMessage(pod *corev1.Pod, status *corev1.PodStatus) {
	ready := map[string]bool{}
	for _, cs := range status.InitContainerStatuses {
		ready[cs.Name] = cs.Ready
	}
	for _, cs := range status.ContainerStatuses {
		ready[cs.Name] = cs.Ready
	}
	var unknown, unready []string
	check := func(name string) {
		switch r, ok := ready[name]; {
		case !ok:
			unknown = append(unknown, name)
		case !r:
			unready = append(unready, name)
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if isSidecar(c) {
			check(c.Name)
		}
	}
	for _, c := range pod.Spec.Containers {
		check(c.Name)
	}
	msg := ""
	if len(unknown) > 0 {
		msg = fmt.Sprintf("containers with unknown status: %s", unknown)
	}
	if len(unready) > 0 {
		if msg != "" {
			msg += ", "
		}
		msg += fmt.Sprintf("containers with unready status: %s", unready)
	}
	for i := range status.Conditions {
		c := &status.Conditions[i]
		if (c.Type == corev1.PodReady || c.Type == corev1.ContainersReady) && c.Status == corev1.ConditionFalse &&
			c.Reason == reasonContainersNotReady && c.Message == "" {
			c.Message = msg
		}
	}
}
