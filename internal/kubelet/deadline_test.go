package kubelet

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestActiveDeadline(t *testing.T) {
	start := metav1.NewTime(time.Unix(1000, 0))
	pod := func(secs *int64) *corev1.Pod { return &corev1.Pod{Spec: corev1.PodSpec{ActiveDeadlineSeconds: secs}} }
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		start *metav1.Time
		now   time.Time
		past  bool
		wait  time.Duration
	}{
		{"no deadline", pod(nil), &start, time.Unix(5000, 0), false, 0},
		{"not started", pod(ptr.To[int64](5)), nil, time.Unix(5000, 0), false, 0},
		{"before", pod(ptr.To[int64](5)), &start, time.Unix(1002, 0), false, 3 * time.Second},
		{"at", pod(ptr.To[int64](5)), &start, time.Unix(1005, 0), true, 0},
		{"after", pod(ptr.To[int64](5)), &start, time.Unix(1100, 0), true, 0},
		{"zero", pod(ptr.To[int64](0)), &start, time.Unix(1000, 0), true, 0},
	} {
		past, wait := activeDeadline(tc.pod, tc.start, tc.now)
		if past != tc.past || wait != tc.wait {
			t.Errorf("%s: past %v wait %v, want %v %v", tc.name, past, wait, tc.past, tc.wait)
		}
	}
}
