package admission

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Deps are what the plugins read the cluster and the request's rights through.
type Deps struct {
	// Client and Factory reach the API server over its loopback connection; the
	// server starts Factory once it serves.
	Client  kubernetes.Interface
	Factory informers.SharedInformerFactory
	// Loopback is the loopback client config, for plugins that need other clients.
	Loopback *rest.Config
	// Authorizer answers the plugins that ask what the requesting user may do.
	Authorizer authorizer.Authorizer
}

// New is the admission chain, in kube-apiserver's order: mutating plugins run in this
// order, then validating ones in this order.
func New(d Deps) (admission.Interface, error) {
	nsLifecycle, err := lifecycle.NewLifecycle(sets.New(metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic))
	if err != nil {
		return nil, fmt.Errorf("admission: NamespaceLifecycle: %w", err)
	}
	nsLifecycle.SetExternalKubeInformerFactory(d.Factory)
	nsLifecycle.SetExternalKubeClientSet(d.Client)
	if err := nsLifecycle.ValidateInitialization(); err != nil {
		return nil, fmt.Errorf("admission: NamespaceLifecycle: %w", err)
	}
	plugins := []admission.Interface{
		nsLifecycle,
		newDefaultStorageClass(d.Factory),
	}
	return admission.NewChainHandler(plugins...), nil
}
