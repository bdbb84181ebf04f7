package replicaset

import (
	"errors"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestReplicaDiff(t *testing.T) {
	for _, tc := range []struct {
		desired       int32
		active, burst int
		want          int
	}{
		{3, 0, 500, 3},
		{3, 3, 500, 0},
		{1, 5, 500, -4},
		{1000, 0, 500, 500},
		{0, 800, 500, -500},
	} {
		if got := replicaDiff(tc.desired, tc.active, tc.burst); got != tc.want {
			t.Errorf("replicaDiff(%d, %d, %d) = %d, want %d", tc.desired, tc.active, tc.burst, got, tc.want)
		}
	}
}

func TestSlowStartBatches(t *testing.T) {
	for n, want := range map[int][]int{0: nil, 1: {1}, 3: {1, 2}, 10: {1, 2, 4, 3}, 15: {1, 2, 4, 8}} {
		if got := slowStartBatches(n); !reflect.DeepEqual(got, want) {
			t.Errorf("slowStartBatches(%d) = %v, want %v", n, got, want)
		}
	}
}

type podOpt func(*corev1.Pod)

func mkPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
		CreationTimestamp: metav1.NewTime(time.Unix(1000, 0))}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func onNode(n string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = n } }
func phase(ph corev1.PodPhase) podOpt {
	return func(p *corev1.Pod) { p.Status.Phase = ph }
}
func readyAt(sec int64) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(time.Unix(sec, 0))})
	}
}
func createdAt(sec int64) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(time.Unix(sec, 0)) }
}
func restarted(n int32) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: n}}
	}
}
func cost(v string) podOpt {
	return func(p *corev1.Pod) { p.Annotations = map[string]string{podDeletionCostAnnotation: v} }
}

func TestPodsToDelete(t *testing.T) {
	running := func(node string, extra ...podOpt) []podOpt {
		return append([]podOpt{onNode(node), phase(corev1.PodRunning), readyAt(2000)}, extra...)
	}
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		n    int
		want []string
	}{
		{"unscheduled first", []*corev1.Pod{mkPod("run", running("a")...), mkPod("unsched")}, 1, []string{"unsched"}},
		{"pending before running", []*corev1.Pod{mkPod("run", running("a")...), mkPod("pend", onNode("b"), phase(corev1.PodPending))}, 1, []string{"pend"}},
		{"not ready before ready", []*corev1.Pod{mkPod("ready", running("a")...), mkPod("notready", onNode("b"), phase(corev1.PodRunning))}, 1, []string{"notready"}},
		{"lower deletion cost first", []*corev1.Pod{mkPod("cheap", running("a", cost("-5"))...), mkPod("dear", running("b", cost("10"))...)}, 1, []string{"cheap"}},
		{"doubled up before alone", []*corev1.Pod{mkPod("alone", running("a")...), mkPod("d1", running("b")...), mkPod("d2", running("b", createdAt(900))...)}, 1, []string{"d1"}},
		{"ready for less time first", []*corev1.Pod{mkPod("old", running("a", readyAt(1500))...), mkPod("young", running("b", readyAt(2500))...)}, 1, []string{"young"}},
		{"more restarts first", []*corev1.Pod{mkPod("calm", running("a", restarted(0))...), mkPod("crashy", running("b", restarted(7))...)}, 1, []string{"crashy"}},
		{"newest first", []*corev1.Pod{mkPod("older", running("a", createdAt(100))...), mkPod("newer", running("b", createdAt(200))...)}, 1, []string{"newer"}},
		{"n capped at len", []*corev1.Pod{mkPod("x")}, 5, []string{"x"}},
		{"zero", []*corev1.Pod{mkPod("x")}, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range podsToDelete(tc.pods, tc.n) {
				got = append(got, p.Name)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("podsToDelete = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestComputeStatus(t *testing.T) {
	now := time.Unix(3000, 0)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Generation: 4}, Spec: appsv1.ReplicaSetSpec{
		Replicas: ptr.To[int32](4), MinReadySeconds: 100,
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "a", "tier": "t"}}}}}
	full := func(p *corev1.Pod) { p.Labels = map[string]string{"app": "a", "tier": "t"} }
	pods := []*corev1.Pod{
		mkPod("avail", full, readyAt(2000)),       // ready for 1000 s: available
		mkPod("justready", full, readyAt(2950)),   // ready for 50 s: not yet available
		mkPod("partial", readyAt(1000)),           // ready, not fully labelled
		mkPod("notready", full, phase("Pending")), // nothing
	}
	st := computeStatus(rs, pods, nil, now)
	want := appsv1.ReplicaSetStatus{Replicas: 4, FullyLabeledReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 2, ObservedGeneration: 4}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("status = %+v, want %+v", st, want)
	}
	st = computeStatus(rs, pods[:1], errors.New("quota exceeded"), now)
	if len(st.Conditions) != 1 || st.Conditions[0].Type != appsv1.ReplicaSetReplicaFailure || st.Conditions[0].Reason != "FailedCreate" {
		t.Errorf("conditions after a failed create = %+v, want ReplicaFailure/FailedCreate", st.Conditions)
	}
	rs.Status = st
	if st := computeStatus(rs, pods, nil, now); len(st.Conditions) != 0 {
		t.Errorf("ReplicaFailure not cleared: %+v", st.Conditions)
	}
}
