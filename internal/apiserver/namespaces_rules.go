package apiserver

import (
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// namespaceHooks check a namespace's name and finalizers, make it Active with the
// "kubernetes" finalizer on create, and keep its finalizers on update.
func namespaceHooks() hooks {
	return hooks{
		name: apivalidation.ValidateNamespaceName,
		validate: func(o runtime.Object) field.ErrorList {
			var errs field.ErrorList
			p := field.NewPath("spec", "finalizers")
			for _, f := range o.(*corev1.Namespace).Spec.Finalizers {
				errs = append(errs, apivalidation.ValidateFinalizerName(string(f), p)...)
				errs = append(errs, validateStandardFinalizer(string(f), p)...)
			}
			return errs
		},
		prepareForCreate: func(o runtime.Object) {
			ns := o.(*corev1.Namespace)
			ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
			if !containsFinalizer(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
				ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
			}
		},
		prepareForUpdate: func(o, old runtime.Object) {
			// spec.finalizers change only through /finalize.
			o.(*corev1.Namespace).Spec.Finalizers = old.(*corev1.Namespace).Spec.Finalizers
		},
	}
}

// containsFinalizer reports whether f is in list.
func containsFinalizer(list []corev1.FinalizerName, f corev1.FinalizerName) bool {
	for _, x := range list {
		if x == f {
			return true
		}
	}
	return false
}
