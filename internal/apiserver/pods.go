package apiserver

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
)

// bindingREST serves pods/binding: the scheduler's bind sets the pod's node once, and
// marks it PodScheduled.
type bindingREST struct{ pods *genericregistry.Store }

var _ rest.NamedCreater = &bindingREST{}

func (r *bindingREST) New() runtime.Object   { return &corev1.Binding{} }
func (r *bindingREST) Destroy()              {}
func (r *bindingREST) NamespaceScoped() bool { return true }

// GetSingularName names the resource in discovery (served also as POST .../bindings).
func (r *bindingREST) GetSingularName() string { return "binding" }

func (r *bindingREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	b, ok := obj.(*corev1.Binding)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a Binding object: %T", obj))
	}
	// POST .../bindings names the pod only in the object.
	if name == "" {
		name = b.Name
	}
	if name != b.Name {
		return nil, apierrors.NewBadRequest("name in URL does not match name in Binding object")
	}
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Binding"}, b.Name, nil)
	}
	if b.Target.Name == "" {
		return nil, apierrors.NewBadRequest("binding target name is required")
	}
	if createValidation != nil {
		if err := createValidation(ctx, b.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	key, err := r.pods.KeyFunc(ctx, name)
	if err != nil {
		return nil, err
	}
	var preconditions *storage.Preconditions
	if b.UID != "" || b.ResourceVersion != "" {
		preconditions = &storage.Preconditions{}
		if b.UID != "" {
			preconditions.UID = &b.UID
		}
		if b.ResourceVersion != "" {
			preconditions.ResourceVersion = &b.ResourceVersion
		}
	}
	dryRun := len(options.DryRun) > 0
	err = r.pods.Storage.GuaranteedUpdate(ctx, key, &corev1.Pod{}, false, preconditions, func(in runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) {
		pod := in.(*corev1.Pod)
		if pod.DeletionTimestamp != nil {
			return nil, nil, apierrors.NewConflict(corev1.Resource("pods/binding"), name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", name))
		}
		if pod.Spec.NodeName != "" {
			return nil, nil, apierrors.NewConflict(corev1.Resource("pods/binding"), name, fmt.Errorf("pod %v is already assigned to node %q", name, pod.Spec.NodeName))
		}
		pod.Spec.NodeName = b.Target.Name
		for k, v := range b.Annotations {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[k] = v
		}
		setPodCondition(&pod.Status, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))})
		return pod, nil, nil
	}, dryRun, nil)
	if err != nil {
		return nil, err
	}
	return &metav1.Status{Status: metav1.StatusSuccess, Code: 201}, nil
}

// podSpecREST serves a subresource of pods that reads the pod whole and updates (PUT or
// PATCH) the part of its spec its strategy takes from the request: pods/ephemeralcontainers
// and pods/resize. It never creates a pod.
type podSpecREST struct {
	store *genericregistry.Store
}

var (
	_ rest.Patcher = &podSpecREST{}
	_ rest.Storage = &podSpecREST{}
)

// newPodSpecREST serves store's pods with update as the update strategy.
func newPodSpecREST(store *genericregistry.Store, update rest.RESTUpdateStrategy) *podSpecREST {
	s := *store
	s.UpdateStrategy = update
	s.CreateStrategy = nil
	s.DeleteStrategy = nil
	return &podSpecREST{store: &s}
}

func (e *podSpecREST) New() runtime.Object { return &corev1.Pod{} }
func (e *podSpecREST) Destroy()            {}

func (e *podSpecREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return e.store.Get(ctx, name, options)
}

func (e *podSpecREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return e.store.Update(ctx, name, objInfo, createValidation, updateValidation, false, options)
}

// setPodCondition adds c or replaces the condition of its type.
func setPodCondition(status *corev1.PodStatus, c corev1.PodCondition) {
	for i := range status.Conditions {
		if status.Conditions[i].Type == c.Type {
			if status.Conditions[i].Status == c.Status {
				c.LastTransitionTime = status.Conditions[i].LastTransitionTime
			}
			status.Conditions[i] = c
			return
		}
	}
	status.Conditions = append(status.Conditions, c)
}
