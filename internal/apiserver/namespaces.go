package apiserver

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
)

// namespaceREST gives namespaces their two-step deletion: DELETE marks the namespace
// Terminating; the namespace controller empties it and removes the "kubernetes"
// finalizer through /finalize; the DELETE after that removes it.
type namespaceREST struct{ *genericregistry.Store }

func (r *namespaceREST) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	obj, err := r.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, false, err
	}
	ns := obj.(*corev1.Namespace)
	if ns.DeletionTimestamp != nil && len(ns.Spec.Finalizers) == 0 {
		return r.Store.Delete(ctx, name, deleteValidation, options)
	}
	if ns.DeletionTimestamp != nil {
		return ns, false, nil
	}
	if deleteValidation != nil {
		if err := deleteValidation(ctx, ns); err != nil {
			return nil, false, err
		}
	}
	key, err := r.KeyFunc(ctx, name)
	if err != nil {
		return nil, false, err
	}
	var preconditions *storage.Preconditions
	if options != nil && options.Preconditions != nil {
		preconditions = &storage.Preconditions{UID: options.Preconditions.UID, ResourceVersion: options.Preconditions.ResourceVersion}
	}
	out := &corev1.Namespace{}
	dryRun := options != nil && len(options.DryRun) > 0
	err = r.Storage.GuaranteedUpdate(ctx, key, out, false, preconditions, func(in runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) {
		ns := in.(*corev1.Namespace)
		if ns.DeletionTimestamp == nil {
			now := metav1.NewTime(time.Now())
			ns.DeletionTimestamp = &now
			ns.Status.Phase = corev1.NamespaceTerminating
		}
		return ns, nil, nil
	}, dryRun, nil)
	if err != nil {
		return nil, false, err
	}
	if len(out.Spec.Finalizers) == 0 {
		return r.Store.Delete(ctx, name, deleteValidation, options)
	}
	return out, false, nil
}

// finalizeStrategy lets /finalize change spec.finalizers and nothing else.
type finalizeStrategy struct{ strategy }

func (s finalizeStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	n, o := obj.(*corev1.Namespace), old.(*corev1.Namespace)
	finalizers := n.Spec.Finalizers
	n.Spec = *o.Spec.DeepCopy()
	n.Spec.Finalizers = finalizers
	n.Status = *o.Status.DeepCopy()
}

func newFinalizeREST(store *genericregistry.Store) *statusREST {
	s := *store
	st := finalizeStrategy{store.UpdateStrategy.(strategy)}
	s.UpdateStrategy = st
	s.ResetFieldsStrategy = nil
	return &statusREST{store: &s}
}
