package apiserver

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// policyResources is the row of policy/v1 PodDisruptionBudgets; the eviction
// subresource of pods honours them.
func policyResources() []resource {
	return []resource{{
		group: "policy", version: "v1", kind: "PodDisruptionBudget", plural: "poddisruptionbudgets", singular: "poddisruptionbudget",
		shortNames: []string{"pdb"}, namespaced: true, status: true, generation: true,
		newObj: func() runtime.Object { return &policyv1.PodDisruptionBudget{} }, newList: func() runtime.Object { return &policyv1.PodDisruptionBudgetList{} },
		columns: []metav1.TableColumnDefinition{nameCol(),
			col("Min Available", "string", "The minimum number of pods that must be available."),
			col("Max Unavailable", "string", "The maximum number of pods that may be unavailable."),
			col("Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time."), ageCol()},
		row: func(o runtime.Object) []interface{} {
			p := o.(*policyv1.PodDisruptionBudget)
			min, max := "N/A", "N/A"
			if p.Spec.MinAvailable != nil {
				min = p.Spec.MinAvailable.String()
			}
			if p.Spec.MaxUnavailable != nil {
				max = p.Spec.MaxUnavailable.String()
			}
			return []interface{}{p.Name, min, max, int64(p.Status.DisruptionsAllowed), age(p.CreationTimestamp)}
		},
		// Upstream checks PodDisruptionBudget names only as path segments.
		hooks: hooks{name: pathSegmentName, validate: func(o runtime.Object) field.ErrorList { return validatePDB(o.(*policyv1.PodDisruptionBudget)) }},
	}}
}

func validatePDB(p *policyv1.PodDisruptionBudget) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if p.Spec.MinAvailable != nil && p.Spec.MaxUnavailable != nil {
		errs = append(errs, field.Invalid(spec, p.Spec, "minAvailable and maxUnavailable cannot be both set"))
	}
	for name, v := range map[string]*intstr.IntOrString{"minAvailable": p.Spec.MinAvailable, "maxUnavailable": p.Spec.MaxUnavailable} {
		if v == nil {
			continue
		}
		errs = append(errs, validatePositiveIntOrPercent(v, spec.Child(name))...)
	}
	if p.Spec.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(p.Spec.Selector, metav1validation.LabelSelectorValidationOptions{}, spec.Child("selector"))...)
	}
	if pol := p.Spec.UnhealthyPodEvictionPolicy; pol != nil && *pol != policyv1.IfHealthyBudget && *pol != policyv1.AlwaysAllow {
		errs = append(errs, field.NotSupported(spec.Child("unhealthyPodEvictionPolicy"), *pol,
			[]policyv1.UnhealthyPodEvictionPolicyType{policyv1.AlwaysAllow, policyv1.IfHealthyBudget}))
	}
	return errs
}

// validatePositiveIntOrPercent: a non-negative integer, or a percentage of at most 100%.
func validatePositiveIntOrPercent(v *intstr.IntOrString, p *field.Path) field.ErrorList {
	switch v.Type {
	case intstr.Int:
		if v.IntVal < 0 {
			return field.ErrorList{field.Invalid(p, v.IntVal, "must be greater than or equal to 0")}
		}
	case intstr.String:
		n, err := intstr.GetScaledValueFromIntOrPercent(v, 100, false)
		if err != nil {
			return field.ErrorList{field.Invalid(p, v.StrVal, "must be an integer or percentage (e.g '5%')")}
		}
		if n < 0 || n > 100 {
			return field.ErrorList{field.Invalid(p, v.StrVal, "must not be greater than 100%")}
		}
	}
	return nil
}
