package nodelifecycle

import (
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
		got := wantedTaints(tc.ready)
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
	got, changed := reconcileTaints(cur, wantedTaints(nil), now)
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
	if _, changed := reconcileTaints(got, wantedTaints(nil), now.Add(time.Hour)); changed {
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
