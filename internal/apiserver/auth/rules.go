package auth

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// RuleAllows reports whether rule grants the request a: its verb, and either its API
// group, resource (with subresource) and name, or its non-resource path.
func RuleAllows(a authorizer.Attributes, rule *rbacv1.PolicyRule) bool {
	if !matchesAny(rule.Verbs, a.GetVerb()) {
		return false
	}
	if !a.IsResourceRequest() {
		return nonResourceURLMatches(rule.NonResourceURLs, a.GetPath())
	}
	return matchesAny(rule.APIGroups, a.GetAPIGroup()) &&
		resourceMatches(rule.Resources, a.GetResource(), a.GetSubresource()) &&
		(len(rule.ResourceNames) == 0 || contains(rule.ResourceNames, a.GetName()))
}

// RulesAllow reports whether any of rules grants a.
func RulesAllow(a authorizer.Attributes, rules ...rbacv1.PolicyRule) bool {
	for i := range rules {
		if RuleAllows(a, &rules[i]) {
			return true
		}
	}
	return false
}

// matchesAny: want is in list, or list has "*".
func matchesAny(list []string, want string) bool {
	for _, s := range list {
		if s == rbacv1.VerbAll || s == want {
			return true
		}
	}
	return false
}

func contains(list []string, want string) bool {
	for _, s := range list {
		if s == want {
			return true
		}
	}
	return false
}

// resourceMatches: "*" matches every resource and subresource; "pods" only the pods
// themselves; "pods/log" that subresource; "*/scale" the scale subresource of any
// resource; "pods/*" every subresource of pods (not pods themselves).
func resourceMatches(list []string, resource, subresource string) bool {
	combined := resource
	if subresource != "" {
		combined = resource + "/" + subresource
	}
	for _, r := range list {
		switch {
		case r == rbacv1.ResourceAll || r == combined:
			return true
		case subresource != "" && r == "*/"+subresource:
			return true
		case subresource != "" && r == resource+"/*":
			return true
		}
	}
	return false
}

// nonResourceURLMatches: an exact path, "*", or a prefix ending in "*".
func nonResourceURLMatches(list []string, path string) bool {
	for _, u := range list {
		switch {
		case u == rbacv1.NonResourceAll || u == path:
			return true
		case strings.HasSuffix(u, "*") && strings.HasPrefix(path, strings.TrimSuffix(u, "*")):
			return true
		}
	}
	return false
}

// SubjectMatches reports whether subject s of a binding in bindingNamespace ("" for a
// ClusterRoleBinding) names the user u: by user name, by one of its groups, or as the
// service account system:serviceaccount:<namespace>:<name>.
func SubjectMatches(s rbacv1.Subject, bindingNamespace string, u user.Info) bool {
	switch s.Kind {
	case rbacv1.UserKind:
		return s.Name == u.GetName()
	case rbacv1.GroupKind:
		return contains(u.GetGroups(), s.Name)
	case rbacv1.ServiceAccountKind:
		ns := s.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		return ns != "" && serviceaccount.MakeUsername(ns, s.Name) == u.GetName()
	}
	return false
}

// anySubjectMatches reports whether a binding's subjects name u.
func anySubjectMatches(subjects []rbacv1.Subject, bindingNamespace string, u user.Info) bool {
	for _, s := range subjects {
		if SubjectMatches(s, bindingNamespace, u) {
			return true
		}
	}
	return false
}
