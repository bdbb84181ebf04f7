package daemonset

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func node(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
}

func TestShouldRun(t *testing.T) {
	ds := func(mod func(*corev1.PodSpec)) *appsv1.DaemonSet {
		d := &appsv1.DaemonSet{}
		if mod != nil {
			mod(&d.Spec.Template.Spec)
		}
		return d
	}
	dedicated := corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name string
		ds   *appsv1.DaemonSet
		node *corev1.Node
		want bool
	}{
		{"plain node", ds(nil), node("a", nil), true},
		{"nodeSelector matches", ds(func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"disk": "ssd"} }), node("a", map[string]string{"disk": "ssd"}), true},
		{"nodeSelector misses", ds(func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"disk": "ssd"} }), node("a", nil), false},
		{"affinity misses", ds(func(s *corev1.PodSpec) {
			s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}}}}}}
		}), node("a", map[string]string{"zone": "a"}), false},
		{"untolerated taint", ds(nil), node("a", nil, dedicated), false},
		{"tolerated taint", ds(func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db", Effect: corev1.TaintEffectNoSchedule}}
		}), node("a", nil, dedicated), true},
		{"PreferNoSchedule ignored", ds(nil), node("a", nil, corev1.Taint{Key: "x", Effect: corev1.TaintEffectPreferNoSchedule}), true},
		{"not-ready and unschedulable tolerated by default", ds(nil), node("a", nil,
			corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
			corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}), true},
		{"network-unavailable only for hostNetwork", ds(nil), node("a", nil, corev1.Taint{Key: corev1.TaintNodeNetworkUnavailable, Effect: corev1.TaintEffectNoSchedule}), false},
		{"network-unavailable with hostNetwork", ds(func(s *corev1.PodSpec) { s.HostNetwork = true }), node("a", nil,
			corev1.Taint{Key: corev1.TaintNodeNetworkUnavailable, Effect: corev1.TaintEffectNoSchedule}), true},
	} {
		if got := shouldRun(tc.ds, tc.node); got != tc.want {
			t.Errorf("%s: shouldRun = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPodForNode(t *testing.T) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system", UID: "u", Generation: 3}}
	ds.Spec.Template.Labels = map[string]string{"app": "agent"}
	ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpExists}}}}},
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1}}}}
	p := newPod(ds, "node-b", "rev1", ptr.To[int64](3))
	if targetNode(p) != "node-b" || p.Spec.NodeName != "" {
		t.Errorf("pod targets %q (nodeName %q), want node-b through affinity", targetNode(p), p.Spec.NodeName)
	}
	if terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; len(terms) != 1 || len(terms[0].MatchExpressions) != 0 {
		t.Errorf("required terms %+v, want only the node name", terms)
	}
	if len(p.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Error("preferred terms dropped")
	}
	if p.GenerateName != "agent-" || p.Labels[RevisionHashLabel] != "rev1" || p.Labels["pod-template-generation"] != "3" || metav1.GetControllerOf(p).UID != "u" {
		t.Errorf("pod meta %+v", p.ObjectMeta)
	}
	if len(p.Spec.Tolerations) != 6 {
		t.Errorf("%d tolerations, want the 6 daemon ones", len(p.Spec.Tolerations))
	}
	if ds.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions == nil {
		t.Error("the template was modified")
	}
}

func mk(name, rev string, ready bool, created int64) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{RevisionHashLabel: rev},
		CreationTimestamp: metav1.NewTime(time.Unix(created, 0))}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if ready {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	return p
}

func TestDecide(t *testing.T) {
	names := func(ps []*corev1.Pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	failed := mk("failed", "r2", false, 1)
	failed.Status.Phase = corev1.PodFailed
	for _, tc := range []struct {
		name       string
		nodes      map[string]nodePods
		maxUnavail int
		create     []string
		del        []string
	}{
		{"one per node", map[string]nodePods{"a": {want: true}, "b": {want: true, pods: []*corev1.Pod{mk("pb", "r2", true, 1)}}}, 1, []string{"a"}, nil},
		{"not wanted", map[string]nodePods{"a": {want: false, pods: []*corev1.Pod{mk("pa", "r2", true, 1)}}}, 1, nil, []string{"pa"}},
		{"duplicates: keep oldest", map[string]nodePods{"a": {want: true, pods: []*corev1.Pod{mk("old", "r2", true, 1), mk("dup", "r2", true, 2)}}}, 1, nil, []string{"dup"}},
		{"failed replaced", map[string]nodePods{"a": {want: true, pods: []*corev1.Pod{failed}}}, 1, []string{"a"}, []string{"failed"}},
		{"rolling: one at a time", map[string]nodePods{
			"a": {want: true, pods: []*corev1.Pod{mk("pa", "r1", true, 1)}},
			"b": {want: true, pods: []*corev1.Pod{mk("pb", "r1", true, 1)}}}, 1, nil, []string{"pa"}},
		{"rolling waits while one is down", map[string]nodePods{
			"a": {want: true},
			"b": {want: true, pods: []*corev1.Pod{mk("pb", "r1", true, 1)}}}, 1, []string{"a"}, nil},
		{"OnDelete keeps old pods", map[string]nodePods{"a": {want: true, pods: []*corev1.Pod{mk("pa", "r1", true, 1)}}}, -1, nil, nil},
	} {
		a := decide(tc.nodes, func(p *corev1.Pod) bool { return podUpdated(p, "r2", nil) }, tc.maxUnavail)
		if !reflect.DeepEqual(a.create, tc.create) || !reflect.DeepEqual(names(a.delete), tc.del) {
			t.Errorf("%s: create %v delete %v; want %v, %v", tc.name, a.create, names(a.delete), tc.create, tc.del)
		}
	}
}
