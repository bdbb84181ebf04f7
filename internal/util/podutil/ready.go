package podutil

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/kubectl/pkg/util/podutils"
)

// ReadyCondition is the pod's Ready condition, nil when it has none.
func ReadyCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// IsRunningAndReady says whether the pod is in phase Running with its Ready condition
// True.
func IsRunningAndReady(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodRunning && podutils.IsPodReady(pod)
}

// ReadySince is when the pod's Ready condition last turned True; zero when the pod is not
// ready.
func ReadySince(pod *corev1.Pod) time.Time {
	if c := ReadyCondition(pod); c != nil && c.Status == corev1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// IsAvailable says whether the pod is ready and, when minReady is positive, has been
// ready for at least minReady at now (a Ready condition without a transition time has
// not).
func IsAvailable(pod *corev1.Pod, minReady time.Duration, now time.Time) bool {
	if !podutils.IsPodReady(pod) {
		return false
	}
	if minReady <= 0 {
		return true
	}
	since := ReadySince(pod)
	return !since.IsZero() && !since.Add(minReady).After(now)
}
