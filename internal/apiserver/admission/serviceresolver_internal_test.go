package admission

import (
	"context"
	"errors"
	"net"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/util/webhook"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

func TestServiceResolver(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, svc := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "cert-manager", Name: "webhook"},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.20", Ports: []corev1.ServicePort{{Port: 443}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "gatekeeper", Name: "headless"},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 443}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "kyverno", Name: "outside"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "hooks.example.com"}},
	} {
		if err := indexer.Add(svc); err != nil {
			t.Fatal(err)
		}
	}
	r := newServiceResolver(corelisters.NewServiceLister(indexer), "https://127.0.0.1:6443")
	for _, tc := range []struct {
		namespace, name string
		port            int32
		want            string // "" for an error
	}{
		{"cert-manager", "webhook", 443, "https://10.96.0.20:443"},
		{"cert-manager", "webhook", 8443, ""},
		{"gatekeeper", "headless", 443, ""},
		{"kyverno", "outside", 9443, "https://hooks.example.com:9443"},
		{"kyverno", "missing", 443, ""},
		{"default", "kubernetes", 443, "https://127.0.0.1:6443"},
		{"", "webhook", 443, ""},
	} {
		u, err := r.ResolveEndpoint(tc.namespace, tc.name, tc.port)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%s/%s:%d resolved to %s, want an error", tc.namespace, tc.name, tc.port, u)
		case tc.want != "" && (err != nil || u.String() != tc.want):
			t.Errorf("%s/%s:%d: got %v, %v; want %s", tc.namespace, tc.name, tc.port, u, err, tc.want)
		}
	}
}

// Webhooks named by a Service are dialled through the cluster network, but for the API
// server's own kubernetes Service (resolved to loopback); webhooks named by a URL are
// dialled as they are.
func TestClusterDialWrapper(t *testing.T) {
	dialed := false
	dial := func(context.Context, string, string) (net.Conn, error) {
		dialed = true
		return nil, errors.New("stand-in")
	}
	base, err := webhook.NewDefaultAuthenticationInfoResolver("")
	if err != nil {
		t.Fatal(err)
	}
	r := ClusterDialWrapper(dial)(base)
	hasDial := func(cfg *rest.Config, err error) bool {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		dialed = false
		if cfg.Dial != nil {
			_, _ = cfg.Dial(context.Background(), "tcp", "10.96.0.20:443")
		}
		return dialed
	}
	if !hasDial(r.ClientConfigForService("webhook", "cert-manager", 443)) {
		t.Error("a Service's webhook is not dialled through the cluster network")
	}
	if hasDial(r.ClientConfigForService("kubernetes", "default", 443)) {
		t.Error("the kubernetes Service (the API server's loopback) is dialled through the cluster network")
	}
	if hasDial(r.ClientConfigFor("hooks.example.com:443")) {
		t.Error("a URL webhook is dialled through the cluster network")
	}
	if cfg, err := ClusterDialWrapper(nil)(base).ClientConfigForService("webhook", "cert-manager", 443); err != nil || cfg.Dial != nil {
		t.Errorf("without a cluster dialer: %v, Dial set %v", err, cfg.Dial != nil)
	}
}
