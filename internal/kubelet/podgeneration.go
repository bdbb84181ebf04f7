package kubelet

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubeletConditions are the pod conditions whose observedGeneration the kubelet sets:
// the ones it computes, and PodScheduled, which it reports True for every pod it runs.
var kubeletConditions = map[corev1.PodConditionType]bool{
	corev1.PodReadyToStartContainers: true,
	corev1.PodInitialized:            true,
	corev1.PodReady:                  true,
	corev1.ContainersReady:           true,
	corev1.PodScheduled:              true,
}

// observeGeneration marks status as computed from the pod's spec at its
// metadata.generation: status.observedGeneration and the observedGeneration of the
// kubelet's conditions become the pod's generation. The pod in the kubelet's cache may
// lag the status the kubelet last wrote (base), so the status's observedGeneration never
// goes back. A pod without PodScheduled gets it True, as the kubelet runs it, first among
// the conditions, where the next status computed from the written one keeps it (the
// kubelet's own conditions follow the others): a condition appended last would move on
// the next sync, and the move alone be written again.
func observeGeneration(pod *corev1.Pod, base *corev1.PodStatus, status *corev1.PodStatus, now metav1.Time) {
	gen := pod.Generation
	status.ObservedGeneration = max(gen, status.ObservedGeneration, base.ObservedGeneration)
	scheduled := false
	for i := range status.Conditions {
		c := &status.Conditions[i]
		if c.Type == corev1.PodScheduled {
			scheduled = true
		}
		if kubeletConditions[c.Type] {
			c.ObservedGeneration = gen
		}
	}
	if !scheduled {
		status.Conditions = append([]corev1.PodCondition{{Type: corev1.PodScheduled,
			Status: corev1.ConditionTrue, LastTransitionTime: now, ObservedGeneration: gen}}, status.Conditions...)
	}
}
