package clusterroleaggregation

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func role(name string, labels map[string]string, verbs ...string) *rbacv1.ClusterRole {
	r := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	for _, v := range verbs {
		r.Rules = append(r.Rules, rbacv1.PolicyRule{Verbs: []string{v}, APIGroups: []string{""}, Resources: []string{"pods"}})
	}
	return r
}

// TestAggregate: the union of the selected roles' rules, each once, in the order of
// the roles' names; unselected roles and the role itself add nothing.
func TestAggregate(t *testing.T) {
	view := role("view", nil, "stale")
	view.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
		{MatchLabels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}}}}
	to := map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}
	all := []*rbacv1.ClusterRole{view, role("z-extra", to, "watch", "get"), role("a-base", to, "get", "list"), role("other", nil, "delete")}
	got, err := Aggregate(view, all)
	if err != nil {
		t.Fatal(err)
	}
	var verbs []string
	for _, r := range got {
		verbs = append(verbs, r.Verbs[0])
	}
	if want := []string{"get", "list", "watch"}; len(verbs) != len(want) || verbs[0] != want[0] || verbs[1] != want[1] || verbs[2] != want[2] {
		t.Fatalf("aggregated verbs %v, want %v", verbs, want)
	}
	bad := role("bad", nil)
	bad.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}}}}
	if _, err := Aggregate(bad, all); err == nil {
		t.Fatal("an invalid selector aggregated without error")
	}
}
