package apiserver

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
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

// namespaceShouldDeleteDuringUpdate: an update removes a terminating namespace only once
// its spec.finalizers are empty too. The store's own rule looks at metadata.finalizers
// only, and would remove a namespace at the namespace controller's first status update,
// before the controller has emptied it.
func namespaceShouldDeleteDuringUpdate(ctx context.Context, key string, obj, existing runtime.Object) bool {
	ns, ok := obj.(*corev1.Namespace)
	return ok && len(ns.Spec.Finalizers) == 0 && genericregistry.ShouldDeleteDuringUpdate(ctx, key, obj, existing)
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

func newFinalizeREST(store *genericregistry.Store) *finalizeREST {
	s := *store
	st := finalizeStrategy{store.UpdateStrategy.(strategy)}
	s.UpdateStrategy = st
	s.ResetFieldsStrategy = nil
	return &finalizeREST{status: &statusREST{store: &s}}
}

// finalizeREST serves namespaces/finalize: update only, as upstream.
type finalizeREST struct{ status *statusREST }

func (f *finalizeREST) New() runtime.Object { return f.status.New() }
func (f *finalizeREST) Destroy()            {}
func (f *finalizeREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return f.status.Update(ctx, name, objInfo, createValidation, updateValidation, forceAllowCreate, options)
}

// namespaceStorage is what the namespaces endpoint offers: every verb of a store but
// deletecollection, which upstream does not serve for namespaces.
type namespaceStorage struct{ w withMeta }

var (
	_ rest.StandardStorage     = namespaceStorage{}.asStandard()
	_ rest.ResetFieldsStrategy = namespaceStorage{}
)

// asStandard is only for the compile-time check above: namespaceStorage has every
// method of a standard storage but DeleteCollection.
func (n namespaceStorage) asStandard() rest.StandardStorage { return n.w }

func (n namespaceStorage) New() runtime.Object     { return n.w.New() }
func (n namespaceStorage) NewList() runtime.Object { return n.w.NewList() }
func (n namespaceStorage) Destroy()                { n.w.Destroy() }
func (n namespaceStorage) NamespaceScoped() bool   { return false }
func (n namespaceStorage) ShortNames() []string    { return n.w.ShortNames() }
func (n namespaceStorage) Categories() []string    { return n.w.Categories() }
func (n namespaceStorage) GetSingularName() string { return n.w.GetSingularName() }
func (n namespaceStorage) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return n.w.Get(ctx, name, options)
}
func (n namespaceStorage) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	return n.w.List(ctx, options)
}
func (n namespaceStorage) Watch(ctx context.Context, options *metainternalversion.ListOptions) (watch.Interface, error) {
	return n.w.Watch(ctx, options)
}
func (n namespaceStorage) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	return n.w.Create(ctx, obj, createValidation, options)
}
func (n namespaceStorage) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return n.w.Update(ctx, name, objInfo, createValidation, updateValidation, forceAllowCreate, options)
}
func (n namespaceStorage) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	return n.w.Delete(ctx, name, deleteValidation, options)
}
func (n namespaceStorage) ConvertToTable(ctx context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	return n.w.ConvertToTable(ctx, obj, opts)
}
func (n namespaceStorage) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return n.w.StandardStorage.(rest.ResetFieldsStrategy).GetResetFields()
}
