package endpoint

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func readyAt(at time.Time) podOpt {
	return func(p *corev1.Pod) { p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(at) }
}

func TestTriggerTimes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	svc := svcWith()
	svc.CreationTimestamp = metav1.NewTime(t0)
	tr := newTriggerTimes()
	const key = "ns/web"
	a := pod("a", "10.244.0.2", readyAt(t0.Add(time.Second)))
	if got := tr.observe(key, svc, []*corev1.Pod{a}); !got.Equal(t0) {
		t.Errorf("first sync: %v, want the Service's creation %v", got, t0)
	}
	if got := tr.observe(key, svc, []*corev1.Pod{a}); !got.IsZero() {
		t.Errorf("nothing changed: %v, want none", got)
	}
	b := pod("b", "10.244.0.3", readyAt(t0.Add(5*time.Second)))
	a2 := pod("a", "10.244.0.2", readyAt(t0.Add(3*time.Second)))
	if got := tr.observe(key, svc, []*corev1.Pod{a2, b}); !got.Equal(t0.Add(3 * time.Second)) {
		t.Errorf("two pods changed: %v, want the earliest %v", got, t0.Add(3*time.Second))
	}
	tr.forget(key)
	if got := tr.observe(key, svc, []*corev1.Pod{a2, b}); !got.Equal(t0) {
		t.Errorf("after forget: %v, want the Service's creation", got)
	}
}
