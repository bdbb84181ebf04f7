package apiserver

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// standardQuotaNames are the quota resource names without a domain prefix.
var standardQuotaNames = sets.New[corev1.ResourceName](
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsStorage, corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
	corev1.ResourcePods, corev1.ResourceServices, corev1.ResourceReplicationControllers, corev1.ResourceQuotas,
	corev1.ResourceSecrets, corev1.ResourceConfigMaps, corev1.ResourcePersistentVolumeClaims,
	corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers)

// integerQuotaNames are counted in whole objects.
var integerQuotaNames = sets.New[corev1.ResourceName](
	corev1.ResourcePods, corev1.ResourceServices, corev1.ResourceReplicationControllers, corev1.ResourceQuotas,
	corev1.ResourceSecrets, corev1.ResourceConfigMaps, corev1.ResourcePersistentVolumeClaims,
	corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers)

// quotaScopes are the scopes a ResourceQuota may name.
var quotaScopes = []string{string(corev1.ResourceQuotaScopeTerminating), string(corev1.ResourceQuotaScopeNotTerminating),
	string(corev1.ResourceQuotaScopeBestEffort), string(corev1.ResourceQuotaScopeNotBestEffort),
	string(corev1.ResourceQuotaScopePriorityClass), string(corev1.ResourceQuotaScopeCrossNamespacePodAffinity),
	string(corev1.ResourceQuotaScopeVolumeAttributesClass)}

// validateResourceQuota: spec.hard (and status) name quota resources with quantities
// that are not negative (whole for object counts); scopes and scope selectors are
// known ones.
func validateResourceQuota(o runtime.Object) field.ErrorList {
	rq := o.(*corev1.ResourceQuota)
	var errs field.ErrorList
	errs = append(errs, quotaList(field.NewPath("spec", "hard"), rq.Spec.Hard)...)
	errs = append(errs, quotaList(field.NewPath("status", "hard"), rq.Status.Hard)...)
	errs = append(errs, quotaList(field.NewPath("status", "used"), rq.Status.Used)...)
	for i, s := range rq.Spec.Scopes {
		if !slices.Contains(quotaScopes, string(s)) {
			errs = append(errs, field.NotSupported(field.NewPath("spec", "scopes").Index(i), s, quotaScopes))
		}
	}
	if sel := rq.Spec.ScopeSelector; sel != nil {
		for i, req := range sel.MatchExpressions {
			p := field.NewPath("spec", "scopeSelector", "matchExpressions").Index(i)
			if !slices.Contains(quotaScopes, string(req.ScopeName)) {
				errs = append(errs, field.NotSupported(p.Child("scopeName"), req.ScopeName, quotaScopes))
			}
			switch req.Operator {
			case corev1.ScopeSelectorOpIn, corev1.ScopeSelectorOpNotIn:
				if len(req.Values) == 0 {
					errs = append(errs, field.Required(p.Child("values"), "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"))
				}
			case corev1.ScopeSelectorOpExists, corev1.ScopeSelectorOpDoesNotExist:
				if len(req.Values) != 0 {
					errs = append(errs, field.Invalid(p.Child("values"), req.Values, "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"))
				}
			default:
				errs = append(errs, field.NotSupported(p.Child("operator"), req.Operator,
					[]string{string(corev1.ScopeSelectorOpIn), string(corev1.ScopeSelectorOpNotIn), string(corev1.ScopeSelectorOpExists), string(corev1.ScopeSelectorOpDoesNotExist)}))
			}
		}
	}
	return errs
}

func quotaList(p *field.Path, list corev1.ResourceList) field.ErrorList {
	var errs field.ErrorList
	for name, q := range list {
		kp := p.Key(string(name))
		for _, msg := range utilvalidation.IsQualifiedName(string(name)) {
			errs = append(errs, field.Invalid(kp, name, msg))
		}
		if !strings.Contains(string(name), "/") && !standardQuotaNames.Has(name) &&
			!strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) && !strings.HasPrefix(string(name), corev1.ResourceRequestsHugePagesPrefix) {
			errs = append(errs, field.Invalid(kp, name, "must be a standard resource for quota"))
		}
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(kp, q.String(), "must be greater than or equal to 0"))
		}
		if integerQuotaNames.Has(name) && q.MilliValue()%1000 != 0 {
			errs = append(errs, field.Invalid(kp, q.String(), "must be an integer"))
		}
	}
	return errs
}
