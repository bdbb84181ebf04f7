package admission

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/admission"
	mutatingwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook/mutating"
	validatingwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook/validating"
	"k8s.io/apiserver/pkg/util/webhook"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
)

// newMutatingWebhook is the admission step upstream calls MutatingAdmissionWebhook: the
// request goes, as an AdmissionReview, to every webhook of the
// MutatingWebhookConfigurations whose rules, selectors and match conditions select it,
// one after the other; each may answer with a JSONPatch the object is patched with, or
// deny the request with its message. A webhook that cannot be called or answers
// nonsense fails the request unless its failurePolicy is Ignore. Requests on the webhook
// configurations and the policies themselves are never sent to webhooks.
//
// It is k8s.io/apiserver's plugin, reading the configurations and namespaces through the
// loopback informers; clientConfig.url is called as it is, clientConfig.service at the
// Service's ClusterIP (serviceResolver) through the cluster network (ClusterDialWrapper),
// verified with clientConfig.caBundle.
func newMutatingWebhook(d Deps) (admission.MutationInterface, error) {
	p, err := mutatingwebhook.NewMutatingWebhook(nil)
	if err != nil {
		return nil, fmt.Errorf("admission: %s: %w", mutatingwebhook.PluginName, err)
	}
	if err := initialize(d, p); err != nil {
		return nil, fmt.Errorf("admission: %s: %w", mutatingwebhook.PluginName, err)
	}
	return p, nil
}

// newValidatingWebhook is the admission step upstream calls ValidatingAdmissionWebhook:
// as newMutatingWebhook, for the ValidatingWebhookConfigurations, whose webhooks are
// called in parallel once the object is final and may only allow or deny it.
func newValidatingWebhook(d Deps) (admission.ValidationInterface, error) {
	p, err := validatingwebhook.NewValidatingAdmissionWebhook(nil)
	if err != nil {
		return nil, fmt.Errorf("admission: %s: %w", validatingwebhook.PluginName, err)
	}
	if err := initialize(d, p); err != nil {
		return nil, fmt.Errorf("admission: %s: %w", validatingwebhook.PluginName, err)
	}
	return p, nil
}

// serviceResolver finds where a webhook's service reference (clientConfig.service) is
// served: at the Service's ClusterIP and the referenced port, at the external name of
// an ExternalName Service, and for the kubernetes Service of the default namespace at
// the API server's own loopback address. The TLS server name stays
// <service>.<namespace>.svc whatever the address.
type serviceResolver struct {
	services corelisters.ServiceLister
	// loopback is the API server's loopback host (host:port).
	loopback string
}

var _ webhook.ServiceResolver = serviceResolver{}

// NewServiceResolver is where the webhooks of the API server (admission, CRD conversion)
// that name a Service are called: see serviceResolver. loopbackURL is the API server's
// own loopback URL.
func NewServiceResolver(services corelisters.ServiceLister, loopbackURL string) webhook.ServiceResolver {
	return newServiceResolver(services, loopbackURL)
}

func newServiceResolver(services corelisters.ServiceLister, loopbackURL string) serviceResolver {
	r := serviceResolver{services: services}
	if u, err := url.Parse(loopbackURL); err == nil {
		r.loopback = u.Host
	}
	return r
}

func (r serviceResolver) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	if namespace == "" || name == "" || port == 0 {
		return nil, fmt.Errorf("cannot resolve a service reference without name, namespace and port")
	}
	if isAPIServerService(namespace, name, int(port)) && r.loopback != "" {
		return &url.URL{Scheme: "https", Host: r.loopback}, nil
	}
	svc, err := r.services.Services(namespace).Get(name)
	if err != nil {
		return nil, fmt.Errorf("service %s/%s: %w", namespace, name, err)
	}
	return serviceAddress(svc, port)
}

// serviceAddress is where svc serves port: its ClusterIP, or its external name.
func serviceAddress(svc *corev1.Service, port int32) (*url.URL, error) {
	hostPort := func(host string) *url.URL {
		return &url.URL{Scheme: "https", Host: net.JoinHostPort(host, strconv.Itoa(int(port)))}
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return hostPort(svc.Spec.ExternalName), nil
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return nil, fmt.Errorf("service %s/%s has no ClusterIP", svc.Namespace, svc.Name)
	}
	for _, p := range svc.Spec.Ports {
		if p.Port == port {
			return hostPort(svc.Spec.ClusterIP), nil
		}
	}
	return nil, fmt.Errorf("service %s/%s has no port %d", svc.Namespace, svc.Name, port)
}

// ClusterDialWrapper has the clients of webhooks named by a Service dial through dial,
// the API server's way into the cluster network, where the Services' ClusterIPs are
// reached, as kube-apiserver's egress selector "cluster" context does. Webhooks named by
// a URL are called from the API server's own network; so is the kubernetes Service of
// the default namespace, which serviceResolver resolves to the API server's loopback
// address. A nil dial changes nothing.
func ClusterDialWrapper(dial func(ctx context.Context, network, addr string) (net.Conn, error)) webhook.AuthenticationInfoResolverWrapper {
	return func(delegate webhook.AuthenticationInfoResolver) webhook.AuthenticationInfoResolver {
		return &webhook.AuthenticationInfoResolverDelegator{
			ClientConfigForFunc: delegate.ClientConfigFor,
			ClientConfigForServiceFunc: func(name, namespace string, port int) (*rest.Config, error) {
				cfg, err := delegate.ClientConfigForService(name, namespace, port)
				if err != nil || dial == nil || isAPIServerService(namespace, name, port) {
					return cfg, err
				}
				cfg = rest.CopyConfig(cfg)
				cfg.Dial = dial
				return cfg, nil
			},
		}
	}
}

// isAPIServerService says whether a service reference names the API server itself (the
// kubernetes Service of the default namespace, port 443).
func isAPIServerService(namespace, name string, port int) bool {
	return namespace == corev1.NamespaceDefault && name == "kubernetes" && port == 443
}
