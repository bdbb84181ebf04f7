package kubelet

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Upstream's words for a pod stopped at its activeDeadlineSeconds.
const (
	reasonDeadlineExceeded  = "DeadlineExceeded"
	messageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// activeDeadline says whether a pod whose status started at start (nil: not started) is
// past its spec.activeDeadlineSeconds at now and, when it is not yet, how long until it
// is (0 for a pod without a deadline or not started).
func activeDeadline(pod *corev1.Pod, start *metav1.Time, now time.Time) (past bool, wait time.Duration) {
	if pod.Spec.ActiveDeadlineSeconds == nil || start == nil || start.IsZero() {
		return false, 0
	}
	deadline := start.Add(time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second)
	if !now.Before(deadline) {
		return true, 0
	}
	return false, deadline.Sub(now)
}

// startTime is when the kubelet started the pod: the start time of its last status
// write, else the pod's.
func (k *Kubelet) startTime(pod *corev1.Pod, st *podState) *metav1.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	if st.written != nil && st.written.StartTime != nil {
		return st.written.StartTime
	}
	return pod.Status.StartTime
}

// failDeadlineExceeded stops a pod past its active deadline, as upstream's kubelet does:
// a DeadlineExceeded event, its containers killed within their grace period, and the
// phase Failed with reason DeadlineExceeded.
func (k *Kubelet) failDeadlineExceeded(ctx context.Context, pod *corev1.Pod, st *podState) error {
	k.recorder.Event(pod, corev1.EventTypeNormal, reasonDeadlineExceeded, messageDeadlineExceeded)
	k.probes.removePod(pod.UID)
	states := st.states
	if st.started || !k.cfg.Hollow {
		if st.started && k.cfg.Hollow {
			k.killingEvents(pod)
		}
		killed, err := k.runtime.KillPod(ctx, pod, terminationGrace(pod))
		if err != nil {
			return fmt.Errorf("kill pod %s/%s past its deadline: %w", pod.Namespace, pod.Name, err)
		}
		if len(killed.Containers) > 0 {
			states = killed.Containers
		}
		st.started, st.states = false, states
	}
	s := terminatedStatus(pod, states, metav1.Now())
	s.Phase, s.Reason, s.Message = corev1.PodFailed, reasonDeadlineExceeded, messageDeadlineExceeded
	s.Conditions = podConditions(s.Conditions,
		ownedConditions(pod, s.Phase, s.InitContainerStatuses, s.ContainerStatuses, false, s.Conditions), metav1.Now())
	return k.writeStatus(ctx, pod, s)
}

// terminationGrace is the pod's terminationGracePeriodSeconds (30 s when unset).
func terminationGrace(pod *corev1.Pod) time.Duration {
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return time.Duration(corev1.DefaultTerminationGracePeriodSeconds) * time.Second
}
