package podutil

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestReadiness(t *testing.T) {
	now := time.Unix(10_000, 0)
	readyAt := func(phase corev1.PodPhase, status corev1.ConditionStatus, at time.Time) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: phase, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(at)},
		}}}
	}
	for _, tc := range []struct {
		name            string
		pod             *corev1.Pod
		minReady        time.Duration
		runningAndReady bool
		since           time.Time
		available       bool
	}{
		{name: "no conditions", pod: &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}},
		{name: "ready false", pod: readyAt(corev1.PodRunning, corev1.ConditionFalse, now.Add(-time.Hour)), minReady: time.Second},
		{name: "ready, no minimum", pod: readyAt(corev1.PodRunning, corev1.ConditionTrue, now),
			runningAndReady: true, since: now, available: true},
		{name: "ready long enough", pod: readyAt(corev1.PodRunning, corev1.ConditionTrue, now.Add(-10*time.Second)), minReady: 10 * time.Second,
			runningAndReady: true, since: now.Add(-10 * time.Second), available: true},
		{name: "ready not long enough", pod: readyAt(corev1.PodRunning, corev1.ConditionTrue, now.Add(-9*time.Second)), minReady: 10 * time.Second,
			runningAndReady: true, since: now.Add(-9 * time.Second)},
		{name: "ready without a transition time", pod: readyAt(corev1.PodRunning, corev1.ConditionTrue, time.Time{}), minReady: time.Second,
			runningAndReady: true},
		{name: "ready but pending", pod: readyAt(corev1.PodPending, corev1.ConditionTrue, now), since: now, available: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsRunningAndReady(tc.pod); got != tc.runningAndReady {
				t.Errorf("IsRunningAndReady = %v, want %v", got, tc.runningAndReady)
			}
			if got := ReadySince(tc.pod); !got.Equal(tc.since) {
				t.Errorf("ReadySince = %v, want %v", got, tc.since)
			}
			if got := IsAvailable(tc.pod, tc.minReady, now); got != tc.available {
				t.Errorf("IsAvailable = %v, want %v", got, tc.available)
			}
		})
	}
}

func TestReadyCondition(t *testing.T) {
	pod := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionFalse}}}}
	c := ReadyCondition(pod)
	if c == nil || c.Status != corev1.ConditionFalse {
		t.Fatalf("ReadyCondition = %+v", c)
	}
	if c != &pod.Status.Conditions[1] {
		t.Error("ReadyCondition does not point into the pod's conditions")
	}
	if ReadyCondition(&corev1.Pod{}) != nil {
		t.Error("ReadyCondition of a pod without conditions is not nil")
	}
}

func TestQOSClass(t *testing.T) {
	rl := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	c := func(req, lim corev1.ResourceList) corev1.Container {
		return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
	}
	pod := func(cs ...corev1.Container) *corev1.Pod { return &corev1.Pod{Spec: corev1.PodSpec{Containers: cs}} }
	full := rl("cpu", "1", "memory", "1Gi")
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want corev1.PodQOSClass
	}{
		{"nothing asked", pod(c(nil, nil)), corev1.PodQOSBestEffort},
		{"only other resources", pod(c(rl("ephemeral-storage", "1Gi"), nil)), corev1.PodQOSBestEffort},
		{"a request only", pod(c(rl("cpu", "1"), nil)), corev1.PodQOSBurstable},
		{"requests equal limits", pod(c(full, full)), corev1.PodQOSGuaranteed},
		{"limits only", pod(c(nil, full)), corev1.PodQOSGuaranteed},
		{"one limit only", pod(c(nil, rl("cpu", "1"))), corev1.PodQOSBurstable},
		{"request below limit", pod(c(rl("cpu", "500m", "memory", "1Gi"), full)), corev1.PodQOSBurstable},
		{"guaranteed beside best effort", pod(c(full, full), c(nil, nil)), corev1.PodQOSBurstable},
		{"two guaranteed", pod(c(full, full), c(nil, full)), corev1.PodQOSGuaranteed},
		{"best effort init container", &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{c(nil, nil)},
			Containers: []corev1.Container{c(full, full)}}}, corev1.PodQOSBurstable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.pod.DeepCopy()
			if got := ComputeQOSClass(tc.pod); got != tc.want {
				t.Errorf("ComputeQOSClass = %s, want %s", got, tc.want)
			}
			if got := QOSClass(tc.pod); got != tc.want {
				t.Errorf("QOSClass = %s, want %s", got, tc.want)
			}
			if tc.pod.Spec.String() != before.Spec.String() {
				t.Error("the pod was changed")
			}
		})
	}
	withStatus := pod(c(nil, nil))
	withStatus.Status.QOSClass = corev1.PodQOSGuaranteed
	if got := QOSClass(withStatus); got != corev1.PodQOSGuaranteed {
		t.Errorf("QOSClass with a status class = %s, want the status'", got)
	}
	if got := ComputeQOSClass(withStatus); got != corev1.PodQOSBestEffort {
		t.Errorf("ComputeQOSClass with a status class = %s, want the spec's", got)
	}
}
