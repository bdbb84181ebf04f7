package apiserver

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// strategy is the generic create/update/delete strategy of a row. It applies the
// Kubernetes object rules every kind shares (status reset, generation, validation of
// metadata) and then the row's hooks.
type strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	r *resource
}

var (
	_ rest.RESTCreateStrategy              = strategy{}
	_ rest.RESTUpdateStrategy              = strategy{}
	_ rest.RESTDeleteStrategy              = strategy{}
	_ rest.ResetFieldsStrategy             = strategy{}
	_ rest.RESTGracefulDeleteStrategy      = strategy{}
	_ rest.GarbageCollectionDeleteStrategy = strategy{}
)

func newStrategy(typer runtime.ObjectTyper, r *resource) strategy {
	return strategy{ObjectTyper: typer, NameGenerator: names.SimpleNameGenerator, r: r}
}

func (s strategy) NamespaceScoped() bool { return s.r.namespaced }

func (s strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	if s.r.status {
		setField(obj, "Status", nil)
	}
	if s.r.generation {
		if m, err := meta.Accessor(obj); err == nil {
			m.SetGeneration(1)
		}
	}
	if s.r.hooks.prepareForCreate != nil {
		s.r.hooks.prepareForCreate(obj)
	}
	if u, ok := genericrequest.UserFrom(ctx); ok && s.r.hooks.requestor != nil {
		s.r.hooks.requestor(obj, u)
	}
}

func (s strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	if s.r.status {
		// A deep copy: the new object must not share maps or slices with the stored one.
		setField(obj, "Status", fieldOf(old.DeepCopyObject(), "Status"))
	}
	if s.r.generation {
		bumpGenerationOnSpecChange(obj, old)
	}
	if s.r.hooks.prepareForUpdate != nil {
		s.r.hooks.prepareForUpdate(obj, old)
	}
}

func (s strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	errs := s.validateObject(obj)
	if s.r.hooks.validateCreate != nil {
		errs = append(errs, s.r.hooks.validateCreate(obj)...)
	}
	return errs
}

// validateObject checks an object about to be created or updated: its metadata and the
// row's own rules.
func (s strategy) validateObject(obj runtime.Object) field.ErrorList {
	errs := s.validateMeta(obj)
	if s.r.hooks.validate != nil {
		errs = append(errs, s.r.hooks.validate(obj)...)
	}
	return errs
}

func (s strategy) validateMeta(obj runtime.Object) field.ErrorList {
	nameFn := apivalidation.NameIsDNSSubdomain
	if s.r.hooks.name != nil {
		nameFn = s.r.hooks.name
	}
	if s.r.hooks.objectName != nil {
		nameFn = s.r.hooks.objectName(obj)
	}
	om, ok := metaOf(obj)
	if !ok {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), fmt.Errorf("%T has no object metadata", obj))}
	}
	errs := apivalidation.ValidateObjectMeta(om, s.r.namespaced, nameFn, field.NewPath("metadata"))
	if standardFinalizerGroups[s.r.group] {
		errs = append(errs, validateStandardFinalizers(om.Finalizers, field.NewPath("metadata", "finalizers"))...)
	}
	return errs
}

// standardFinalizerGroups are the groups whose kinds allow only the standard finalizer
// names without a "/" (the others allow any qualified name).
var standardFinalizerGroups = map[string]bool{
	"": true, "apps": true, "batch": true, "autoscaling": true, "networking.k8s.io": true, "storage.k8s.io": true,
	"scheduling.k8s.io": true, "rbac.authorization.k8s.io": true, "discovery.k8s.io": true, "certificates.k8s.io": true,
	"resource.k8s.io": true,
}

// validateStandardFinalizers rejects a finalizer without "/" that is not one of the
// standard ones (kubernetes, orphan, foregroundDeletion).
func validateStandardFinalizers(finalizers []string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, f := range finalizers {
		errs = append(errs, validateStandardFinalizer(f, fldPath.Index(i))...)
	}
	return errs
}

func validateStandardFinalizer(f string, fldPath *field.Path) field.ErrorList {
	if strings.Contains(f, "/") {
		return nil
	}
	switch f {
	case string(corev1.FinalizerKubernetes), metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents:
		return nil
	}
	return field.ErrorList{field.Invalid(fldPath, f, "name is neither a standard finalizer name nor is it fully qualified")}
}

func (s strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	errs := s.validateObject(obj)
	if nm, ok := metaOf(obj); ok {
		if om, ok := metaOf(old); ok {
			errs = append(errs, apivalidation.ValidateObjectMetaUpdate(nm, om, field.NewPath("metadata"))...)
		}
	}
	if s.r.hooks.validateUpdate != nil {
		errs = append(errs, s.r.hooks.validateUpdate(obj, old)...)
	}
	return errs
}

func (s strategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string { return nil }
func (s strategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

// Canonicalize labels a namespace with its name (known only now for a generated name).
func (s strategy) Canonicalize(obj runtime.Object) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		defaultNamespaceLabel(ns)
	}
}
func (s strategy) AllowCreateOnUpdate(ctx context.Context) bool      { return false }
func (s strategy) AllowUnconditionalUpdate(ctx context.Context) bool { return true }

// GetResetFields tells server-side apply which fields this endpoint ignores: the main
// resource ignores status when the kind has a status subresource.
func (s strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	if !s.r.status {
		return nil
	}
	return map[fieldpath.APIVersion]*fieldpath.Set{
		fieldpath.APIVersion(s.r.gv().String()): fieldpath.NewSet(fieldpath.MakePathOrDie("status")),
	}
}

func (s strategy) CheckGracefulDelete(ctx context.Context, obj runtime.Object, options *metav1.DeleteOptions) bool {
	if s.r.hooks.gracefulDelete == nil {
		return false
	}
	return s.r.hooks.gracefulDelete(ctx, obj, options)
}

// DefaultGarbageCollectionPolicy: dependents are deleted in the background, as upstream
// for every kind served at v1.
func (s strategy) DefaultGarbageCollectionPolicy(ctx context.Context) rest.GarbageCollectionPolicy {
	return rest.DeleteDependents
}

// statusStrategy serves /status: it keeps everything but status (and metadata's
// labels, annotations and finalizers, which status writers may change) from the old object.
type statusStrategy struct{ strategy }

func (s statusStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	old = old.DeepCopyObject()
	for _, f := range structFields(obj) {
		if f != "TypeMeta" && f != "ObjectMeta" && f != "Status" {
			setField(obj, f, fieldOf(old, f))
		}
	}
	if s.r.hooks.prepareForStatusUpdate != nil {
		s.r.hooks.prepareForStatusUpdate(obj, old)
	}
}

func (s statusStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	var errs field.ErrorList
	if nm, ok := metaOf(obj); ok {
		if om, ok := metaOf(old); ok {
			errs = append(errs, apivalidation.ValidateObjectMetaUpdate(nm, om, field.NewPath("metadata"))...)
		}
	}
	if s.r.hooks.validateStatusUpdate != nil {
		errs = append(errs, s.r.hooks.validateStatusUpdate(ctx, obj, old)...)
	}
	return errs
}

func (s statusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		fieldpath.APIVersion(s.r.gv().String()): fieldpath.NewSet(fieldpath.MakePathOrDie("spec")),
	}
}

func metaOf(obj runtime.Object) (*metav1.ObjectMeta, bool) {
	a, ok := obj.(metav1.ObjectMetaAccessor)
	if !ok {
		return nil, false
	}
	om, ok := a.GetObjectMeta().(*metav1.ObjectMeta)
	return om, ok
}

// bumpGenerationOnSpecChange increments metadata.generation when anything but metadata
// and status changed, as upstream does for kinds with a spec.
func bumpGenerationOnSpecChange(obj, old runtime.Object) {
	nm, ok1 := metaOf(obj)
	om, ok2 := metaOf(old)
	if !ok1 || !ok2 {
		return
	}
	nm.Generation = om.Generation
	for _, f := range structFields(obj) {
		if f == "TypeMeta" || f == "ObjectMeta" || f == "Status" {
			continue
		}
		if !apiequality.Semantic.DeepEqual(fieldOf(obj, f), fieldOf(old, f)) {
			nm.Generation = om.Generation + 1
			return
		}
	}
	// Deletion starts a new generation too (upstream bumps it when deletionTimestamp is set).
	if nm.DeletionTimestamp != nil && om.DeletionTimestamp == nil {
		nm.Generation = om.Generation + 1
	}
}

func structFields(obj runtime.Object) []string {
	t := reflect.TypeOf(obj).Elem()
	out := make([]string, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		out = append(out, t.Field(i).Name)
	}
	return out
}

// fieldOf returns obj's top-level field name (a copy of its value), or nil.
func fieldOf(obj runtime.Object, name string) interface{} {
	v := reflect.ValueOf(obj).Elem().FieldByName(name)
	if !v.IsValid() {
		return nil
	}
	return v.Interface()
}

// setField sets obj's top-level field name to value, or to its zero value when nil.
func setField(obj runtime.Object, name string, value interface{}) {
	v := reflect.ValueOf(obj).Elem().FieldByName(name)
	if !v.IsValid() || !v.CanSet() {
		return
	}
	if value == nil {
		v.Set(reflect.Zero(v.Type()))
		return
	}
	v.Set(reflect.ValueOf(value))
}
