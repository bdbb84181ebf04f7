package nodelifecycle

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestWantedTaints(t *testing.T) {
	for _, tc := range []struct {
		ready *corev1.NodeCondition
		key   string
	}{
		{nil, corev1.TaintNodeUnreachable},
		{&corev1.NodeCondition{Status: corev1.ConditionUnknown}, corev1.TaintNodeUnreachable},
		{&corev1.NodeCondition{Status: corev1.ConditionFalse}, corev1.TaintNodeNotReady},
		{&corev1.NodeCondition{Status: corev1.ConditionTrue}, ""},
	} {
		got := wantedTaints(tc.ready, false)
		if tc.key == "" {
			if len(got) != 0 {
				t.Errorf("ready node gets %v", got)
			}
			continue
		}
		if len(got) != 2 || got[0].Key != tc.key || got[1].Key != tc.key || got[0].Effect != corev1.TaintEffectNoSchedule || got[1].Effect != corev1.TaintEffectNoExecute {
			t.Errorf("%v: taints %v, want %s NoSchedule+NoExecute", tc.ready, got, tc.key)
		}
	}
}

func TestReconcileTaints(t *testing.T) {
	now := time.Unix(100, 0)
	other := corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	cur := []corev1.Taint{other, {Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}}
	got, changed := reconcileTaints(cur, wantedTaints(nil, false), now)
	if !changed || len(got) != 3 || got[0].Key != "dedicated" {
		t.Fatalf("taints %v changed %v", got, changed)
	}
	for _, tt := range got[1:] {
		if tt.Key != corev1.TaintNodeUnreachable {
			t.Errorf("unexpected %v", tt)
		}
		if tt.Effect == corev1.TaintEffectNoExecute && (tt.TimeAdded == nil || !tt.TimeAdded.Time.Equal(now)) {
			t.Errorf("NoExecute taint without timeAdded: %v", tt)
		}
	}
	if _, changed := reconcileTaints(got, wantedTaints(nil, false), now.Add(time.Hour)); changed {
		t.Error("no-op reported as a change")
	}
	back, changed := reconcileTaints(got, nil, now)
	if !changed || len(back) != 1 || back[0].Key != "dedicated" {
		t.Errorf("after recovery %v", back)
	}
}

func TestEvictionTime(t *testing.T) {
	added := time.Unix(1000, 0)
	now := added.Add(10 * time.Second)
	unreachable := []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: added}},
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}}
	tol := func(key string, secs *int64) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: secs}
	}
	custom := []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: added}}}
	for _, tc := range []struct {
		name   string
		tols   []corev1.Toleration
		taints []corev1.Taint
		at     time.Time
		evict  bool
	}{
		{"no toleration: the default window", nil, unreachable, added.Add(300 * time.Second), true},
		{"own window", []corev1.Toleration{tol(corev1.TaintNodeUnreachable, ptr.To[int64](60))}, unreachable, added.Add(60 * time.Second), true},
		{"tolerates forever", []corev1.Toleration{tol(corev1.TaintNodeUnreachable, nil)}, unreachable, time.Time{}, false},
		{"shortest matching window", []corev1.Toleration{tol(corev1.TaintNodeUnreachable, nil), tol("", ptr.To[int64](5))}, unreachable, added.Add(5 * time.Second), true},
		{"zero seconds: now", []corev1.Toleration{tol(corev1.TaintNodeUnreachable, ptr.To[int64](0))}, unreachable, added, true},
		{"untolerated custom taint: at once", nil, custom, added, true},
		{"NoSchedule only: stays", nil, unreachable[1:], time.Time{}, false},
	} {
		p := &corev1.Pod{Spec: corev1.PodSpec{Tolerations: tc.tols}}
		at, evict := evictionTime(p, tc.taints, 300, now)
		if evict != tc.evict || (evict && !at.Equal(tc.at)) {
			t.Errorf("%s: evictionTime = %v, %v; want %v, %v", tc.name, at, evict, tc.at, tc.evict)
		}
	}
}

// A cordoned node carries node.kubernetes.io/unschedulable:NoSchedule next to what its
// Ready condition asks for; uncordoned, it loses it and keeps taints not ours.
func TestCordonTaint(t *testing.T) {
	now := time.Unix(100, 0)
	ready := &corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}
	unschedulable := corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name          string
		ready         *corev1.NodeCondition
		unschedulable bool
		want          []string
	}{
		{"ready, schedulable", ready, false, nil},
		{"ready, cordoned", ready, true, []string{"node.kubernetes.io/unschedulable:NoSchedule"}},
		{"not ready, cordoned", &corev1.NodeCondition{Status: corev1.ConditionFalse}, true, []string{"node.kubernetes.io/not-ready:NoSchedule",
			"node.kubernetes.io/not-ready:NoExecute", "node.kubernetes.io/unschedulable:NoSchedule"}},
	} {
		var got []string
		for _, tt := range wantedTaints(tc.ready, tc.unschedulable) {
			got = append(got, tt.Key+":"+string(tt.Effect))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: taints %v, want %v", tc.name, got, tc.want)
		}
	}

	other := corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	cordoned, changed := reconcileTaints([]corev1.Taint{other}, wantedTaints(ready, true), now)
	if !changed || len(cordoned) != 2 || !cordoned[1].MatchTaint(&unschedulable) || cordoned[1].TimeAdded != nil {
		t.Fatalf("cordon: taints %v changed %v", cordoned, changed)
	}
	if _, changed := reconcileTaints(cordoned, wantedTaints(ready, true), now); changed {
		t.Error("cordoned again: reported a change")
	}
	uncordoned, changed := reconcileTaints(cordoned, wantedTaints(ready, false), now)
	if !changed || len(uncordoned) != 1 || uncordoned[0].Key != "dedicated" {
		t.Errorf("uncordon: taints %v changed %v", uncordoned, changed)
	}
}

func TestTaintInputsChanged(t *testing.T) {
	base := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	cordoned := base.DeepCopy()
	cordoned.Spec.Unschedulable = true
	notReady := base.DeepCopy()
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	tainted := base.DeepCopy()
	tainted.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}}
	heartbeat := base.DeepCopy()
	heartbeat.Status.Conditions[0].LastHeartbeatTime = metav1.Now()
	labelled := base.DeepCopy()
	labelled.Labels = map[string]string{"a": "b"}
	for _, tc := range []struct {
		name string
		cur  *corev1.Node
		want bool
	}{
		{"cordon", cordoned, true}, {"ready changed", notReady, true}, {"taint removed or added", tainted, true},
		{"heartbeat only", heartbeat, false}, {"labels only", labelled, false},
	} {
		if got := taintInputsChanged(base, tc.cur); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
