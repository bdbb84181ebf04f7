package apiserver

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateNode: every pod CIDR of the node parses.
func validateNode(o runtime.Object) field.ErrorList {
	n := o.(*corev1.Node)
	var errs field.ErrorList
	for _, cidr := range n.Spec.PodCIDRs {
		if _, err := parseCIDR(cidr); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "podCIDRs"), cidr, err.Error()))
		}
	}
	return errs
}
