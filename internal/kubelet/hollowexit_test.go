package kubelet

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestHollowExits: a hollow pod's app containers exit kubelab.dev/hollow-run-seconds
// after they started, with kubelab.dev/hollow-exit-code, and the pod's phase follows
// (restartPolicy Never); before that the kubelet is told when to look again.
func TestHollowExits(t *testing.T) {
	start := time.Unix(1000, 0)
	pod := func(ann map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: ann}, Spec: corev1.PodSpec{
			RestartPolicy:  corev1.RestartPolicyNever,
			InitContainers: []corev1.Container{{Name: "setup"}},
			Containers:     []corev1.Container{{Name: "a"}, {Name: "b"}},
		}}
	}
	states := []ContainerState{
		{Name: "setup", StartedAt: start, Terminated: true, Reason: "Completed", FinishedAt: start},
		{Name: "a", StartedAt: start},
		{Name: "b", StartedAt: start.Add(2 * time.Second)},
	}
	for _, tc := range []struct {
		name      string
		ann       map[string]string
		at        time.Duration // after start
		exited    []string
		code      int32
		next      time.Duration
		wantPhase corev1.PodPhase
	}{
		{name: "no annotation", at: time.Hour, next: 0, wantPhase: corev1.PodRunning},
		{name: "before", ann: map[string]string{"kubelab.dev/hollow-run-seconds": "5"}, at: 3 * time.Second,
			next: 2 * time.Second, wantPhase: corev1.PodRunning},
		{name: "first due", ann: map[string]string{"kubelab.dev/hollow-run-seconds": "5"}, at: 6 * time.Second,
			exited: []string{"a"}, next: time.Second, wantPhase: corev1.PodRunning},
		{name: "all done", ann: map[string]string{"kubelab.dev/hollow-run-seconds": "5"}, at: 7 * time.Second,
			exited: []string{"a", "b"}, wantPhase: corev1.PodSucceeded},
		{name: "failed", ann: map[string]string{"kubelab.dev/hollow-run-seconds": "0.5", "kubelab.dev/hollow-exit-code": "42"},
			at: 3 * time.Second, exited: []string{"a", "b"}, code: 42, wantPhase: corev1.PodFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pod(tc.ann)
			got, next := hollowExits(p, states, start.Add(tc.at))
			if next != tc.next {
				t.Errorf("next exit in %v, want %v", next, tc.next)
			}
			exited := map[string]bool{}
			for _, n := range tc.exited {
				exited[n] = true
			}
			for i, s := range got[1:] {
				if s.Terminated != exited[s.Name] {
					t.Errorf("container %s terminated = %v, want %v", s.Name, s.Terminated, exited[s.Name])
					continue
				}
				if !s.Terminated {
					continue
				}
				run, _ := time.ParseDuration(tc.ann["kubelab.dev/hollow-run-seconds"] + "s")
				wantReason := "Completed"
				if tc.code != 0 {
					wantReason = "Error"
				}
				if s.ExitCode != tc.code || s.Reason != wantReason || !s.FinishedAt.Equal(states[i+1].StartedAt.Add(run)) {
					t.Errorf("container %s: exit %d %q at %v; want %d %q at start+%v", s.Name, s.ExitCode, s.Reason, s.FinishedAt, tc.code, wantReason, run)
				}
			}
			if !got[0].Terminated || got[0].ExitCode != 0 {
				t.Errorf("init container changed: %+v", got[0])
			}
			if states[1].Terminated || states[2].Terminated {
				t.Fatal("hollowExits changed its input")
			}
			if ph := podPhase(p, got); ph != tc.wantPhase {
				t.Errorf("phase %s, want %s", ph, tc.wantPhase)
			}
		})
	}
}
