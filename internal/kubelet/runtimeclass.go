package kubelet

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	nodelisters "k8s.io/client-go/listers/node/v1"
)

// RuntimeClasses resolves the RuntimeClass a pod names (spec.runtimeClassName) to the
// runtime handler its sandbox runs with, as upstream's kubelet does: from a watch of the
// RuntimeClasses (a kubelet may get, list and watch them) and, for a name the cache does
// not hold (yet), from the API server.
type RuntimeClasses struct {
	lister nodelisters.RuntimeClassLister
	client kubernetes.Interface
}

// NewRuntimeClasses returns the resolver over factory's RuntimeClass informer (which
// starts with the factory) and client.
func NewRuntimeClasses(factory informers.SharedInformerFactory, client kubernetes.Interface) *RuntimeClasses {
	return &RuntimeClasses{lister: factory.Node().V1().RuntimeClasses().Lister(), client: client}
}

// Handler is the handler of the RuntimeClass called name ("" for the default class, an
// empty name); a class that does not exist is the API's NotFound error.
func (r *RuntimeClasses) Handler(ctx context.Context, name string) (string, error) {
	if name == "" {
		return "", nil
	}
	rc, err := r.lister.Get(name)
	if apierrors.IsNotFound(err) {
		rc, err = r.client.NodeV1().RuntimeClasses().Get(ctx, name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return "", err
	}
	if err != nil {
		return "", fmt.Errorf("look up RuntimeClass %s: %w", name, err)
	}
	return rc.Handler, nil
}
