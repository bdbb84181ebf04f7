package apiserver

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// standardLimitTypes are the LimitRange item types without a domain prefix.
var standardLimitTypes = []string{string(corev1.LimitTypePod), string(corev1.LimitTypeContainer), string(corev1.LimitTypePersistentVolumeClaim)}

// validateLimitRange: each item has a known type (once), resource names fit its type,
// min ≤ defaultRequest ≤ default ≤ max, maxLimitRequestRatio ≥ 1 (and ≤ max/min), a
// Pod item has no defaults and a PersistentVolumeClaim item bounds storage.
func validateLimitRange(o runtime.Object) field.ErrorList {
	lr := o.(*corev1.LimitRange)
	var errs field.ErrorList
	seen := map[corev1.LimitType]bool{}
	for i := range lr.Spec.Limits {
		item := &lr.Spec.Limits[i]
		p := field.NewPath("spec", "limits").Index(i)
		errs = append(errs, limitTypeName(p.Child("type"), string(item.Type))...)
		if seen[item.Type] {
			errs = append(errs, field.Duplicate(p.Child("type"), item.Type))
		}
		seen[item.Type] = true
		names := sets.New[corev1.ResourceName]()
		check := func(child string, list corev1.ResourceList) {
			for k := range list {
				errs = append(errs, limitResourceName(item.Type, p.Child(child).Key(string(k)), string(k))...)
				names.Insert(k)
			}
		}
		check("max", item.Max)
		check("min", item.Min)
		if item.Type == corev1.LimitTypePod {
			if len(item.Default) > 0 {
				errs = append(errs, field.Forbidden(p.Child("default"), "may not be specified when `type` is 'Pod'"))
			}
			if len(item.DefaultRequest) > 0 {
				errs = append(errs, field.Forbidden(p.Child("defaultRequest"), "may not be specified when `type` is 'Pod'"))
			}
		} else {
			check("default", item.Default)
			check("defaultRequest", item.DefaultRequest)
		}
		if item.Type == corev1.LimitTypePersistentVolumeClaim {
			_, hasMin := item.Min[corev1.ResourceStorage]
			_, hasMax := item.Max[corev1.ResourceStorage]
			if !hasMin && !hasMax {
				errs = append(errs, field.Required(p.Child("limits"), "either minimum or maximum storage value is required, but neither was provided"))
			}
		}
		check("maxLimitRequestRatio", item.MaxLimitRequestRatio)
		for _, k := range sets.List(names) {
			errs = append(errs, limitRangeOrder(p, k, item)...)
		}
	}
	return errs
}

// limitRangeOrder checks the quantities one item gives resource k against each other.
func limitRangeOrder(p *field.Path, k corev1.ResourceName, item *corev1.LimitRangeItem) field.ErrorList {
	var errs field.ErrorList
	key := string(k)
	min, hasMin := item.Min[k]
	max, hasMax := item.Max[k]
	def, hasDef := item.Default[k]
	defReq, hasDefReq := item.DefaultRequest[k]
	ratio, hasRatio := item.MaxLimitRequestRatio[k]
	if item.Type == corev1.LimitTypePod {
		hasDef, hasDefReq = false, false
	}
	if hasMin && hasMax && min.Cmp(max) > 0 {
		errs = append(errs, field.Invalid(p.Child("min").Key(key), min.String(), fmt.Sprintf("min value %s is greater than max value %s", min.String(), max.String())))
	}
	if hasDefReq && hasMin && min.Cmp(defReq) > 0 {
		errs = append(errs, field.Invalid(p.Child("defaultRequest").Key(key), defReq.String(), fmt.Sprintf("min value %s is greater than default request value %s", min.String(), defReq.String())))
	}
	if hasDefReq && hasMax && defReq.Cmp(max) > 0 {
		errs = append(errs, field.Invalid(p.Child("defaultRequest").Key(key), defReq.String(), fmt.Sprintf("default request value %s is greater than max value %s", defReq.String(), max.String())))
	}
	if hasDefReq && hasDef && defReq.Cmp(def) > 0 {
		errs = append(errs, field.Invalid(p.Child("defaultRequest").Key(key), defReq.String(), fmt.Sprintf("default request value %s is greater than default limit value %s", defReq.String(), def.String())))
	}
	if hasDef && hasMin && min.Cmp(def) > 0 {
		errs = append(errs, field.Invalid(p.Child("default").Key(key), min.String(), fmt.Sprintf("min value %s is greater than default value %s", min.String(), def.String())))
	}
	if hasDef && hasMax && def.Cmp(max) > 0 {
		errs = append(errs, field.Invalid(p.Child("default").Key(key), max.String(), fmt.Sprintf("default value %s is greater than max value %s", def.String(), max.String())))
	}
	if hasRatio && ratio.Cmp(*apiresource.NewQuantity(1, apiresource.DecimalSI)) < 0 {
		errs = append(errs, field.Invalid(p.Child("maxLimitRequestRatio").Key(key), ratio.String(), fmt.Sprintf("ratio %s is less than 1", ratio.String())))
	}
	if hasRatio && hasMin && hasMax && min.Sign() > 0 {
		r, lo, hi := float64(ratio.Value()), float64(min.Value()), float64(max.Value())
		if ratio.Value() < apiresource.MaxMilliValue && min.Value() < apiresource.MaxMilliValue && max.Value() < apiresource.MaxMilliValue {
			r, lo, hi = float64(ratio.MilliValue())/1000, float64(min.MilliValue()), float64(max.MilliValue())
		}
		if r > hi/lo {
			errs = append(errs, field.Invalid(p.Child("maxLimitRequestRatio").Key(key), ratio.String(), fmt.Sprintf("ratio %s is greater than max/min = %f", ratio.String(), hi/lo)))
		}
	}
	return errs
}

func limitTypeName(p *field.Path, v string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsQualifiedName(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	if len(errs) == 0 && !strings.Contains(v, "/") && !slices.Contains(standardLimitTypes, v) {
		errs = append(errs, field.NotSupported(p, v, standardLimitTypes))
	}
	return errs
}

// limitResourceName: a name with a domain prefix is an extended resource; one without
// must be a resource of the item's type.
func limitResourceName(t corev1.LimitType, p *field.Path, v string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsQualifiedName(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	if len(errs) > 0 || strings.Contains(v, "/") {
		return errs
	}
	switch t {
	case corev1.LimitTypePod, corev1.LimitTypeContainer:
		switch corev1.ResourceName(v) {
		case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		default:
			if !strings.HasPrefix(v, corev1.ResourceHugePagesPrefix) {
				errs = append(errs, field.Invalid(p, v, "must be a standard resource for containers"))
			}
		}
	default:
		switch corev1.ResourceName(v) {
		case corev1.ResourceStorage, corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		default:
			errs = append(errs, field.Invalid(p, v, "must be a standard resource type or fully qualified"))
		}
	}
	return errs
}
