package apiserver

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// rbacResources are the rows of rbac.authorization.k8s.io/v1: Roles, ClusterRoles and
// their bindings, which the authorizer reads.
func rbacResources() []resource {
	rbac := func(r resource) resource { r.group, r.version = "rbac.authorization.k8s.io", "v1"; return r }
	return []resource{
		rbac(resource{kind: "Role", plural: "roles", singular: "role", namespaced: true,
			newObj: func() runtime.Object { return &rbacv1.Role{} }, newList: func() runtime.Object { return &rbacv1.RoleList{} },
			hooks: hooks{name: pathSegmentName,
				validate: func(o runtime.Object) field.ErrorList { return validatePolicyRules(o.(*rbacv1.Role).Rules, true) }},
			columns: []metav1.TableColumnDefinition{nameCol(), col("Created At", "date", "When the role was created")},
			row: func(o runtime.Object) []interface{} {
				r := o.(*rbacv1.Role)
				return []interface{}{r.Name, r.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")}
			}}),
		rbac(resource{kind: "ClusterRole", plural: "clusterroles", singular: "clusterrole",
			newObj: func() runtime.Object { return &rbacv1.ClusterRole{} }, newList: func() runtime.Object { return &rbacv1.ClusterRoleList{} },
			hooks: hooks{name: pathSegmentName,
				validate: func(o runtime.Object) field.ErrorList { return validateClusterRole(o.(*rbacv1.ClusterRole)) }},
			columns: []metav1.TableColumnDefinition{nameCol(), col("Created At", "date", "When the role was created")},
			row: func(o runtime.Object) []interface{} {
				r := o.(*rbacv1.ClusterRole)
				return []interface{}{r.Name, r.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")}
			}}),
		rbac(resource{kind: "RoleBinding", plural: "rolebindings", singular: "rolebinding", namespaced: true,
			newObj: func() runtime.Object { return &rbacv1.RoleBinding{} }, newList: func() runtime.Object { return &rbacv1.RoleBindingList{} },
			hooks: hooks{name: pathSegmentName,
				validate: func(o runtime.Object) field.ErrorList {
					b := o.(*rbacv1.RoleBinding)
					return validateBinding(b.RoleRef, b.Subjects, true)
				},
				validateUpdate: func(o, old runtime.Object) field.ErrorList {
					return validateRoleRefUpdate(o.(*rbacv1.RoleBinding).RoleRef, old.(*rbacv1.RoleBinding).RoleRef)
				}},
			columns: bindingColumns(),
			row: func(o runtime.Object) []interface{} {
				b := o.(*rbacv1.RoleBinding)
				return bindingRow(b.Name, b.RoleRef, b.Subjects, b.CreationTimestamp)
			}}),
		rbac(resource{kind: "ClusterRoleBinding", plural: "clusterrolebindings", singular: "clusterrolebinding",
			newObj: func() runtime.Object { return &rbacv1.ClusterRoleBinding{} }, newList: func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} },
			hooks: hooks{name: pathSegmentName,
				validate: func(o runtime.Object) field.ErrorList {
					b := o.(*rbacv1.ClusterRoleBinding)
					return validateBinding(b.RoleRef, b.Subjects, false)
				},
				validateUpdate: func(o, old runtime.Object) field.ErrorList {
					return validateRoleRefUpdate(o.(*rbacv1.ClusterRoleBinding).RoleRef, old.(*rbacv1.ClusterRoleBinding).RoleRef)
				}},
			columns: bindingColumns(),
			row: func(o runtime.Object) []interface{} {
				b := o.(*rbacv1.ClusterRoleBinding)
				return bindingRow(b.Name, b.RoleRef, b.Subjects, b.CreationTimestamp)
			}}),
	}
}

func bindingColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{nameCol(), col("Role", "string", "The role it grants"), ageCol(),
		wide("Users", "string", "Users in the binding"), wide("Groups", "string", "Groups in the binding"),
		wide("ServiceAccounts", "string", "ServiceAccounts in the binding")}
}

func bindingRow(name string, ref rbacv1.RoleRef, subjects []rbacv1.Subject, created metav1.Time) []interface{} {
	var users, groups, sas []string
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		case rbacv1.ServiceAccountKind:
			sas = append(sas, s.Namespace+"/"+s.Name)
		}
	}
	return []interface{}{name, ref.Kind + "/" + ref.Name, age(created), strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(sas, ", ")}
}

// validatePolicyRules checks RBAC rules: verbs always, and either non-resource URLs
// (cluster roles only, alone) or API groups and resources.
func validatePolicyRules(rules []rbacv1.PolicyRule, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	for i, rule := range rules {
		p := field.NewPath("rules").Index(i)
		if len(rule.Verbs) == 0 {
			errs = append(errs, field.Required(p.Child("verbs"), "verbs must contain at least one value"))
		}
		if len(rule.NonResourceURLs) > 0 {
			if namespaced {
				errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
			}
			if len(rule.APIGroups) > 0 || len(rule.Resources) > 0 || len(rule.ResourceNames) > 0 {
				errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
			}
			continue
		}
		if len(rule.APIGroups) == 0 {
			errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
		}
		if len(rule.Resources) == 0 {
			errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
		}
	}
	return errs
}

func validateClusterRole(r *rbacv1.ClusterRole) field.ErrorList {
	errs := validatePolicyRules(r.Rules, false)
	if r.AggregationRule == nil {
		return errs
	}
	p := field.NewPath("aggregationRule", "clusterRoleSelectors")
	if len(r.AggregationRule.ClusterRoleSelectors) == 0 {
		errs = append(errs, field.Required(p, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
	}
	for i := range r.AggregationRule.ClusterRoleSelectors {
		sel := &r.AggregationRule.ClusterRoleSelectors[i]
		errs = append(errs, metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, p.Index(i))...)
		if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
			errs = append(errs, field.Invalid(p.Index(i), sel, "invalid label selector."))
		}
	}
	return errs
}

// validateBinding checks a binding's roleRef (a Role only in a namespaced binding) and
// subjects (a ServiceAccount subject needs a namespace in a cluster binding).
func validateBinding(ref rbacv1.RoleRef, subjects []rbacv1.Subject, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	rp := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(rp.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	kinds := []string{"ClusterRole"}
	if namespaced {
		kinds = []string{"Role", "ClusterRole"}
	}
	if !slices.Contains(kinds, ref.Kind) {
		errs = append(errs, field.NotSupported(rp.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(rp.Child("name"), ""))
	} else {
		for _, msg := range pathSegmentName(ref.Name, false) {
			errs = append(errs, field.Invalid(rp.Child("name"), ref.Name, msg))
		}
	}
	for i, sub := range subjects {
		p := field.NewPath("subjects").Index(i)
		if sub.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		}
		switch sub.Kind {
		case rbacv1.ServiceAccountKind:
			if sub.Name != "" {
				for _, msg := range apivalidation.NameIsDNSSubdomain(sub.Name, false) {
					errs = append(errs, field.Invalid(p.Child("name"), sub.Name, msg))
				}
			}
			if sub.APIGroup != "" {
				errs = append(errs, field.NotSupported(p.Child("apiGroup"), sub.APIGroup, []string{""}))
			}
			if !namespaced && sub.Namespace == "" {
				errs = append(errs, field.Required(p.Child("namespace"), ""))
			}
		case rbacv1.UserKind, rbacv1.GroupKind:
			if sub.APIGroup != rbacv1.GroupName {
				errs = append(errs, field.NotSupported(p.Child("apiGroup"), sub.APIGroup, []string{rbacv1.GroupName}))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("kind"), sub.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
		}
	}
	return errs
}

func validateRoleRefUpdate(ref, old rbacv1.RoleRef) field.ErrorList {
	if ref != old {
		return field.ErrorList{field.Invalid(field.NewPath("roleRef"), ref, "cannot change roleRef")}
	}
	return nil
}
