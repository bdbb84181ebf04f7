package auth

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/informers"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
)

// RBAC is the authorizer of rbac.authorization.k8s.io: a request is allowed when a rule
// of a role bound to its user (by name, group or service account) allows it;
// otherwise it has no opinion and the next authorizer, or the final deny, answers.
// It reads the roles and bindings from informers, so a binding takes effect as soon
// as the server's watch delivers it.
type RBAC struct {
	roles               rbaclisters.RoleLister
	roleBindings        rbaclisters.RoleBindingLister
	clusterRoles        rbaclisters.ClusterRoleLister
	clusterRoleBindings rbaclisters.ClusterRoleBindingLister
}

var (
	_ authorizer.Authorizer   = (*RBAC)(nil)
	_ authorizer.RuleResolver = (*RBAC)(nil)
)

// NewRBAC registers its informers on f; the caller starts f.
func NewRBAC(f informers.SharedInformerFactory) *RBAC {
	rbac := f.Rbac().V1()
	return &RBAC{roles: rbac.Roles().Lister(), roleBindings: rbac.RoleBindings().Lister(),
		clusterRoles: rbac.ClusterRoles().Lister(), clusterRoleBindings: rbac.ClusterRoleBindings().Lister()}
}

// Authorize allows a when a bound rule allows it, naming the binding and role in the
// reason.
func (r *RBAC) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	var reason string
	var errs []error
	r.visitRules(a.GetUser(), a.GetNamespace(), func(source string, rule *rbacv1.PolicyRule, err error) bool {
		if err != nil {
			errs = append(errs, err)
			return true
		}
		if RuleAllows(a, rule) {
			reason = "RBAC: allowed by " + source
			return false
		}
		return true
	})
	if reason != "" {
		return authorizer.DecisionAllow, reason, nil
	}
	if len(errs) > 0 {
		// Missing roles explain a denial; they are no error of the request.
		return authorizer.DecisionNoOpinion, fmt.Sprintf("RBAC: %v", errs), nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// ConditionsAwareAuthorize: RBAC decides without conditions.
func (r *RBAC) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(r.Authorize(ctx, a))
}

// EvaluateConditions: RBAC never returns conditions.
func (r *RBAC) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// RulesFor lists the rules bound to u cluster-wide and in namespace, for
// SelfSubjectRulesReview; incomplete is true when a binding names a missing role.
func (r *RBAC) RulesFor(_ context.Context, u user.Info, namespace string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	var res []authorizer.ResourceRuleInfo
	var nonRes []authorizer.NonResourceRuleInfo
	var errs []error
	r.visitRules(u, namespace, func(_ string, rule *rbacv1.PolicyRule, err error) bool {
		if err != nil {
			errs = append(errs, err)
			return true
		}
		if len(rule.Resources) > 0 {
			res = append(res, &authorizer.DefaultResourceRuleInfo{Verbs: rule.Verbs, APIGroups: rule.APIGroups,
				Resources: rule.Resources, ResourceNames: rule.ResourceNames})
		}
		if len(rule.NonResourceURLs) > 0 {
			nonRes = append(nonRes, &authorizer.DefaultNonResourceRuleInfo{Verbs: rule.Verbs, NonResourceURLs: rule.NonResourceURLs})
		}
		return true
	})
	if len(errs) > 0 {
		return res, nonRes, true, fmt.Errorf("%v", errs)
	}
	return res, nonRes, false, nil
}

// visitRules calls visit with every rule bound to u: first through ClusterRoleBindings,
// then through the RoleBindings of namespace. visit returns false to stop.
func (r *RBAC) visitRules(u user.Info, namespace string, visit func(source string, rule *rbacv1.PolicyRule, err error) bool) {
	if u == nil {
		return
	}
	crbs, err := r.clusterRoleBindings.List(labels.Everything())
	if err != nil && !visit("", nil, err) {
		return
	}
	for _, b := range crbs {
		if !anySubjectMatches(b.Subjects, "", u) {
			continue
		}
		rules, err := r.roleRules(b.RoleRef, "")
		if err != nil {
			if !visit("", nil, fmt.Errorf("clusterrolebinding %q: %w", b.Name, err)) {
				return
			}
			continue
		}
		source := fmt.Sprintf("ClusterRoleBinding %q of ClusterRole %q to User %q", b.Name, b.RoleRef.Name, u.GetName())
		for i := range rules {
			if !visit(source, &rules[i], nil) {
				return
			}
		}
	}
	if namespace == "" {
		return
	}
	rbs, err := r.roleBindings.RoleBindings(namespace).List(labels.Everything())
	if err != nil && !visit("", nil, err) {
		return
	}
	for _, b := range rbs {
		if !anySubjectMatches(b.Subjects, namespace, u) {
			continue
		}
		rules, err := r.roleRules(b.RoleRef, namespace)
		if err != nil {
			if !visit("", nil, fmt.Errorf("rolebinding %s/%s: %w", namespace, b.Name, err)) {
				return
			}
			continue
		}
		source := fmt.Sprintf("RoleBinding %q of %s %q to User %q", namespace+"/"+b.Name, b.RoleRef.Kind, b.RoleRef.Name, u.GetName())
		for i := range rules {
			if !visit(source, &rules[i], nil) {
				return
			}
		}
	}
}

// roleRules are the rules of the role a binding refers to; namespace is the
// binding's ("" for a ClusterRoleBinding, which may refer only to ClusterRoles).
func (r *RBAC) roleRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch {
	case ref.Kind == "ClusterRole":
		role, err := r.clusterRoles.Get(ref.Name)
		if err != nil {
			return nil, err
		}
		return role.Rules, nil
	case ref.Kind == "Role" && namespace != "":
		role, err := r.roles.Roles(namespace).Get(ref.Name)
		if err != nil {
			return nil, err
		}
		return role.Rules, nil
	}
	return nil, fmt.Errorf("unsupported role reference kind %q", ref.Kind)
}
