package apiserver

import (
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"
)

// pvcHooks make a new claim Pending and check its spec; on update only
// resources.requests (a bound claim's resize, never a shrink) and
// volumeAttributesClassName may change, and, while unbound, volumeName and a first
// storageClassName.
func pvcHooks() hooks {
	return hooks{
		prepareForCreate: func(o runtime.Object) {
			o.(*corev1.PersistentVolumeClaim).Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
		},
		validate: func(o runtime.Object) field.ErrorList {
			return validatePVCSpec(&o.(*corev1.PersistentVolumeClaim).Spec, field.NewPath("spec"))
		},
		validateUpdate: func(o, old runtime.Object) field.ErrorList {
			pvc, opvc := o.(*corev1.PersistentVolumeClaim), old.(*corev1.PersistentVolumeClaim)
			mutable := pvc.Spec.DeepCopy()
			mutable.Resources.Requests = opvc.Spec.Resources.Requests
			mutable.VolumeAttributesClassName = opvc.Spec.VolumeAttributesClassName
			if opvc.Spec.VolumeName == "" {
				mutable.VolumeName = ""
				// A claim that names no class may be given one (the PV controller gives
				// it the default class), once.
				if !storagehelpers.PersistentVolumeClaimHasClass(opvc) && pvc.Spec.StorageClassName != nil && *pvc.Spec.StorageClassName != "" {
					mutable.StorageClassName = nil
				}
			}
			if !apiequality.Semantic.DeepEqual(*mutable, opvc.Spec) {
				return field.ErrorList{field.Forbidden(field.NewPath("spec"), "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims, and storageClassName for a claim that names none")}
			}
			newSize, oldSize := pvc.Spec.Resources.Requests[corev1.ResourceStorage], opvc.Spec.Resources.Requests[corev1.ResourceStorage]
			if newSize.Cmp(oldSize) != 0 && opvc.Status.Phase != corev1.ClaimBound {
				return field.ErrorList{field.Forbidden(field.NewPath("spec", "resources", "requests", "storage"), "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize")}
			}
			if newSize.Cmp(oldSize) < 0 {
				return field.ErrorList{field.Forbidden(field.NewPath("spec", "resources", "requests", "storage"), "field can not be less than status.capacity")}
			}
			return nil
		},
	}
}

// validatePVCSpec checks a claim's spec (also a StatefulSet's claim templates).
func validatePVCSpec(ps *corev1.PersistentVolumeClaimSpec, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(ps.AccessModes) == 0 {
		errs = append(errs, field.Required(spec.Child("accessModes"), "at least 1 access mode is required"))
	}
	errs = append(errs, validateAccessModes(ps.AccessModes, spec.Child("accessModes"))...)
	if ps.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(ps.Selector, metav1validation.LabelSelectorValidationOptions{}, spec.Child("selector"))...)
	}
	// Upstream reports the storage request at spec.resources[storage].
	reqPath := spec.Child("resources").Key(string(corev1.ResourceStorage))
	q, ok := ps.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		errs = append(errs, field.Required(reqPath, ""))
	} else if q.Sign() <= 0 {
		errs = append(errs, field.Invalid(reqPath, q.String(), "must be greater than zero"))
	}
	errs = append(errs, validateVolumeModeAndClass(ps.VolumeMode, ps.StorageClassName, spec)...)
	if ds, ref := ps.DataSource, ps.DataSourceRef; ds != nil && ref != nil && (ref.Namespace == nil || *ref.Namespace == "") {
		if ptr.Deref(ds.APIGroup, "") != ptr.Deref(ref.APIGroup, "") || ds.Kind != ref.Kind || ds.Name != ref.Name {
			errs = append(errs, field.Invalid(spec, spec.Child("dataSource"), "must match dataSourceRef"))
		}
	}
	return errs
}
