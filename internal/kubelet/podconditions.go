package kubelet

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons of the conditions the kubelet owns, as upstream's kubelet writes them.
const (
	condContainersNotInitialized = "ContainersNotInitialized"
	condContainersNotReady       = "ContainersNotReady"
	condReadinessGatesNotReady   = "ReadinessGatesNotReady"
	condPodCompleted             = "PodCompleted"
	condPodFailed                = "PodFailed"
)

// ownedConditions are the conditions the kubelet owns (PodReadyToStartContainers,
// Initialized, Ready, ContainersReady) for a pod in phase whose init and app containers
// have the statuses given, by upstream's rules:
//   - Initialized is True once every regular init container terminated with exit code 0
//     (it is ready) and every sidecar started, once an app container ran, or when the
//     pod succeeded; else False, ContainersNotInitialized, "containers with incomplete
//     status: [a b]";
//   - ContainersReady is True when every app container and sidecar is ready; else False,
//     PodCompleted or PodFailed in a terminal phase, ContainersNotReady ("containers
//     with unready status: [a]") otherwise;
//   - Ready is ContainersReady, and then False (ReadinessGatesNotReady) while one of the
//     pod's readiness gates is not a True condition of others (in others).
func ownedConditions(pod *corev1.Pod, phase corev1.PodPhase, initStatuses, statuses []corev1.ContainerStatus, sandbox bool, others []corev1.PodCondition) []corev1.PodCondition {
	sb := corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue}
	if !sandbox {
		sb.Status = corev1.ConditionFalse
	}
	containersReady := containersReadyCondition(pod, phase, initStatuses, statuses)
	ready := containersReady
	ready.Type = corev1.PodReady
	if ready.Status == corev1.ConditionTrue {
		if msg := unreadyGates(pod, others); msg != "" {
			ready.Status, ready.Reason, ready.Message = corev1.ConditionFalse, condReadinessGatesNotReady, msg
		}
	}
	return []corev1.PodCondition{sb, initializedCondition(pod, phase, initStatuses, statuses), ready, containersReady}
}

func initializedCondition(pod *corev1.Pod, phase corev1.PodPhase, initStatuses, statuses []corev1.ContainerStatus) corev1.PodCondition {
	c := corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}
	var unknown, incomplete []string
	for i := range pod.Spec.InitContainers {
		ic := &pod.Spec.InitContainers[i]
		st, ok := statusOf(initStatuses, ic.Name)
		switch {
		case !ok:
			unknown = append(unknown, ic.Name)
		case isSidecar(*ic) && (st.Started == nil || !*st.Started):
			incomplete = append(incomplete, ic.Name)
		case !isSidecar(*ic) && !st.Ready:
			incomplete = append(incomplete, ic.Name)
		}
	}
	switch {
	case phase == corev1.PodSucceeded && len(unknown) == 0:
		c.Reason = condPodCompleted
		return c
	case appContainerRan(statuses):
		return c // initialized before; only sidecars may be restarting
	}
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %v", unknown))
	}
	if len(incomplete) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with incomplete status: %v", incomplete))
	}
	if len(msgs) > 0 {
		c.Status, c.Reason, c.Message = corev1.ConditionFalse, condContainersNotInitialized, strings.Join(msgs, ", ")
	}
	return c
}

func containersReadyCondition(pod *corev1.Pod, phase corev1.PodPhase, initStatuses, statuses []corev1.ContainerStatus) corev1.PodCondition {
	c := corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}
	var unknown, unready []string
	check := func(name string, sts []corev1.ContainerStatus) {
		st, ok := statusOf(sts, name)
		switch {
		case !ok:
			unknown = append(unknown, name)
		case !st.Ready:
			unready = append(unready, name)
		}
	}
	for _, ic := range pod.Spec.InitContainers {
		if isSidecar(ic) {
			check(ic.Name, initStatuses)
		}
	}
	for _, ac := range pod.Spec.Containers {
		check(ac.Name, statuses)
	}
	switch {
	case phase == corev1.PodSucceeded && len(unknown) == 0:
		c.Status, c.Reason = corev1.ConditionFalse, condPodCompleted
		return c
	case phase == corev1.PodFailed:
		c.Status, c.Reason = corev1.ConditionFalse, condPodFailed
		return c
	}
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %v", unknown))
	}
	if len(unready) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unready status: %v", unready))
	}
	if len(msgs) > 0 {
		c.Status, c.Reason, c.Message = corev1.ConditionFalse, condContainersNotReady, strings.Join(msgs, ", ")
	}
	return c
}

// unreadyGates says which of the pod's readiness gates hold it back ("" when none).
func unreadyGates(pod *corev1.Pod, conds []corev1.PodCondition) string {
	var msgs []string
	for _, g := range pod.Spec.ReadinessGates {
		var found *corev1.PodCondition
		for i := range conds {
			if conds[i].Type == g.ConditionType {
				found = &conds[i]
			}
		}
		switch {
		case found == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(g.ConditionType)))
		case found.Status != corev1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(g.ConditionType), found.Status))
		}
	}
	return strings.Join(msgs, ", ")
}

// appContainerRan says whether an app container runs or has run.
func appContainerRan(statuses []corev1.ContainerStatus) bool {
	for _, s := range statuses {
		if s.State.Running != nil || s.State.Terminated != nil {
			return true
		}
	}
	return false
}

func statusOf(sts []corev1.ContainerStatus, name string) (corev1.ContainerStatus, bool) {
	for _, s := range sts {
		if s.Name == name {
			return s, true
		}
	}
	return corev1.ContainerStatus{}, false
}

// isKubeletCondition says whether the kubelet owns conditions of type t.
func isKubeletCondition(t corev1.PodConditionType) bool {
	switch t {
	case corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady:
		return true
	}
	return false
}

// podConditions puts the kubelet's conditions want in place of its earlier ones in prev,
// keeping the others (PodScheduled, DisruptionTarget, readiness gates' …); a condition's
// transition time moves only when its status changes.
func podConditions(prev, want []corev1.PodCondition, now metav1.Time) []corev1.PodCondition {
	out := make([]corev1.PodCondition, 0, len(prev)+len(want))
	for _, p := range prev {
		if !isKubeletCondition(p.Type) {
			out = append(out, p)
		}
	}
	for _, w := range want {
		w.LastTransitionTime = now
		for _, p := range prev {
			if p.Type == w.Type && p.Status == w.Status {
				w.LastTransitionTime = p.LastTransitionTime
			}
		}
		out = append(out, w)
	}
	return out
}
