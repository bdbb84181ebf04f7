package auth

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

func TestRuleAllows(t *testing.T) {
	res := func(verb, group, resource, sub, name string) authorizer.Attributes {
		return authorizer.AttributesRecord{ResourceRequest: true, Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Name: name}
	}
	path := func(verb, p string) authorizer.Attributes { return authorizer.AttributesRecord{Verb: verb, Path: p} }
	for _, c := range []struct {
		name string
		rule rbacv1.PolicyRule
		a    authorizer.Attributes
		want bool
	}{
		{"exact", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}, res("get", "", "pods", "", "p"), true},
		{"other verb", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}, res("delete", "", "pods", "", "p"), false},
		{"other group", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"deployments"}}, res("get", "apps", "deployments", "", ""), false},
		{"resource is not its subresource", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}, res("get", "", "pods", "log", "p"), false},
		{"subresource", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods/log"}}, res("get", "", "pods", "log", "p"), true},
		{"any resource's subresource", rbacv1.PolicyRule{Verbs: []string{"update"}, APIGroups: []string{"*"}, Resources: []string{"*/scale"}}, res("update", "apps", "deployments", "scale", "d"), true},
		{"every subresource", rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{""}, Resources: []string{"pods/*"}}, res("create", "", "pods", "exec", "p"), true},
		{"every subresource is not the resource", rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{""}, Resources: []string{"pods/*"}}, res("create", "", "pods", "", ""), false},
		{"named", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"a"}}, res("get", "", "secrets", "", "a"), true},
		{"other name", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"a"}}, res("get", "", "secrets", "", "b"), false},
		{"names do not grant list", rbacv1.PolicyRule{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"a"}}, res("list", "", "secrets", "", ""), false},
		{"path", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}, path("get", "/healthz"), true},
		{"path prefix", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/apis/*"}}, path("get", "/apis/apps/v1"), true},
		{"path is no resource", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"*"}}, path("get", "/healthz"), false},
		{"resource is no path", rbacv1.PolicyRule{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}, res("get", "", "pods", "", ""), false},
	} {
		if got := RuleAllows(c.a, &c.rule); got != c.want {
			t.Errorf("%s: RuleAllows = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestSubjectMatches(t *testing.T) {
	sa := &user.DefaultInfo{Name: "system:serviceaccount:team:builder", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:team"}}
	for _, c := range []struct {
		s         rbacv1.Subject
		namespace string
		want      bool
	}{
		{rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "team", Name: "builder"}, "", true},
		{rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "builder"}, "team", true},
		{rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "builder"}, "other", false},
		{rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "builder"}, "", false},
		{rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "system:serviceaccounts:team"}, "", true},
		{rbacv1.Subject{Kind: rbacv1.UserKind, Name: "builder"}, "", false},
	} {
		if got := SubjectMatches(c.s, c.namespace, sa); got != c.want {
			t.Errorf("subject %+v in namespace %q: %v, want %v", c.s, c.namespace, got, c.want)
		}
	}
}

// TestBootstrapPolicy: every binding refers to a role of the policy, every controller
// role is bound to its service account, and the roles kubectl users expect exist.
func TestBootstrapPolicy(t *testing.T) {
	roles := map[string]rbacv1.ClusterRole{}
	for _, r := range ClusterRoles() {
		if _, dup := roles[r.Name]; dup {
			t.Errorf("ClusterRole %s twice", r.Name)
		}
		roles[r.Name] = r
	}
	for _, name := range []string{"cluster-admin", "admin", "edit", "view", "system:basic-user", "system:discovery",
		"system:public-info-viewer", "system:node", "system:node-proxier", "system:kube-scheduler", "system:kube-controller-manager"} {
		if _, ok := roles[name]; !ok {
			t.Errorf("no ClusterRole %s", name)
		}
	}
	bound := map[string]bool{}
	for _, b := range ClusterRoleBindings() {
		if _, ok := roles[b.RoleRef.Name]; !ok {
			t.Errorf("ClusterRoleBinding %s refers to missing ClusterRole %s", b.Name, b.RoleRef.Name)
		}
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind {
				bound[b.RoleRef.Name+"="+s.Namespace+"/"+s.Name] = true
			}
		}
	}
	for _, name := range ControllerNames() {
		if !bound[controllerPrefix+name+"=kube-system/"+name] {
			t.Errorf("controller role of %s is not bound to kube-system/%s", name, name)
		}
	}
	anyone := &user.DefaultInfo{Name: "someone", Groups: []string{user.AllAuthenticated}}
	ssar := authorizer.AttributesRecord{User: anyone, ResourceRequest: true, Verb: "create", APIGroup: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}
	if !RulesAllow(ssar, roles["system:basic-user"].Rules...) {
		t.Error("system:basic-user does not allow selfsubjectaccessreviews")
	}
}
