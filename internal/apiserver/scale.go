package apiserver

import (
	"context"
	"fmt"
	"reflect"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
)

// scaleREST serves <workload>/scale as autoscaling/v1 Scale over spec.replicas, for
// `kubectl scale` and autoscalers.
type scaleREST struct {
	r     *resource
	store *genericregistry.Store
}

var (
	_ rest.Patcher                  = &scaleREST{}
	_ rest.GroupVersionKindProvider = &scaleREST{}
)

func (s *scaleREST) New() runtime.Object { return &autoscalingv1.Scale{} }
func (s *scaleREST) Destroy()            {}
func (s *scaleREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return autoscalingv1.SchemeGroupVersion.WithKind("Scale")
}

func (s *scaleREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	obj, err := s.store.Get(ctx, name, options)
	if err != nil {
		return nil, err
	}
	return scaleOf(obj)
}

func (s *scaleREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	info := scaleUpdate{name: name, inner: objInfo, kind: s.r.gvk()}
	obj, _, err := s.store.Update(ctx, name, info,
		func(ctx context.Context, obj runtime.Object) error {
			return apierrors.NewNotFound(s.r.groupResource(), name)
		},
		func(ctx context.Context, obj, old runtime.Object) error {
			if updateValidation == nil {
				return nil
			}
			ns, err := scaleOf(obj)
			if err != nil {
				return err
			}
			os, err := scaleOf(old)
			if err != nil {
				return err
			}
			return updateValidation(ctx, ns, os)
		}, false, options)
	if err != nil {
		return nil, false, err
	}
	out, err := scaleOf(obj)
	return out, false, err
}

// scaleUpdate turns an update of the Scale into an update of the workload.
type scaleUpdate struct {
	name  string
	inner rest.UpdatedObjectInfo
	kind  schema.GroupVersionKind
}

func (u scaleUpdate) Preconditions() *metav1.Preconditions { return u.inner.Preconditions() }

func (u scaleUpdate) UpdatedObject(ctx context.Context, old runtime.Object) (runtime.Object, error) {
	oldScale, err := scaleOf(old)
	if err != nil {
		return nil, err
	}
	obj, err := u.inner.UpdatedObject(ctx, oldScale)
	if err != nil {
		return nil, err
	}
	scale, ok := obj.(*autoscalingv1.Scale)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("expected a Scale, got %T", obj))
	}
	if scale.Spec.Replicas < 0 {
		return nil, apierrors.NewInvalid(autoscalingv1.SchemeGroupVersion.WithKind("Scale").GroupKind(), u.name,
			field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), scale.Spec.Replicas, "must be greater than or equal to 0")})
	}
	out := old.DeepCopyObject()
	m, _ := metaOf(out)
	if scale.ResourceVersion != "" {
		m.ResourceVersion = scale.ResourceVersion
	}
	replicas := scale.Spec.Replicas
	reflect.ValueOf(out).Elem().FieldByName("Spec").FieldByName("Replicas").Set(reflect.ValueOf(&replicas))
	return out, nil
}

// scaleOf reads a workload's Scale: spec.replicas, status.replicas and the selector.
func scaleOf(obj runtime.Object) (*autoscalingv1.Scale, error) {
	m, ok := metaOf(obj)
	if !ok {
		return nil, fmt.Errorf("no metadata on %T", obj)
	}
	v := reflect.ValueOf(obj).Elem()
	spec, status := v.FieldByName("Spec"), v.FieldByName("Status")
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, CreationTimestamp: m.CreationTimestamp,
	}}
	if r, ok := spec.FieldByName("Replicas").Interface().(*int32); ok && r != nil {
		scale.Spec.Replicas = *r
	}
	scale.Status.Replicas = int32(status.FieldByName("Replicas").Int())
	if sel, ok := spec.FieldByName("Selector").Interface().(*metav1.LabelSelector); ok && sel != nil {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return nil, err
		}
		scale.Status.Selector = s.String()
	}
	// A ReplicationController selects by a plain label map.
	if sel, ok := spec.FieldByName("Selector").Interface().(map[string]string); ok {
		scale.Status.Selector = labels.SelectorFromSet(sel).String()
	}
	return scale, nil
}
