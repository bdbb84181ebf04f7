package admission

import (
	"context"
	"fmt"
	"net"

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
	// Stop is closed once the server has stopped serving; the plugins' background
	// loops (the policies' and webhooks' sources) end then.
	Stop <-chan struct{}
	// ClusterDial reaches the cluster network, where webhooks named by a Service are
	// called (the API server's Config.ClusterDial); nil: from the process's namespace.
	ClusterDial func(ctx context.Context, network, addr string) (net.Conn, error)
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
	// The webhooks and the policies come last, as upstream: webhooks see the object the
	// built-in plugins made.
	mutatingPolicies, err := newMutatingAdmissionPolicy(d)
	if err != nil {
		return nil, err
	}
	mutatingWebhook, err := newMutatingWebhook(d)
	if err != nil {
		return nil, err
	}
	policies, err := newValidatingAdmissionPolicy(d)
	if err != nil {
		return nil, err
	}
	validatingWebhook, err := newValidatingWebhook(d)
	if err != nil {
		return nil, err
	}
	podSecurity, err := newPodSecurity(d.Factory, d.Client)
	if err != nil {
		return nil, err
	}
	// ResourceQuota comes after every other validation, as upstream: only a request
	// nothing else refuses is charged.
	quota, err := newResourceQuota(d)
	if err != nil {
		return nil, err
	}
	plugins := []admission.Interface{
		nsLifecycle,
		newLimitRanger(d.Factory, d.Client),
		newServiceAccount(d.Factory, d.Client),
		newNodeRestriction(d.Factory, d.Client, d.Authorizer),
		podSecurity,
		newPriority(d.Factory, d.Client),
		newDefaultTolerationSeconds(),
		newDefaultStorageClass(d.Factory),
		newStorageObjectInUseProtection(),
		newPersistentVolumeClaimResize(d.Factory),
		newRuntimeClass(d.Factory, d.Client),
		newPodResizeValidator(d.Factory),
		mutatingPolicies,
		mutatingWebhook,
		policies,
		validatingWebhook,
		quota,
	}
	return admission.NewChainHandler(plugins...), nil
}
