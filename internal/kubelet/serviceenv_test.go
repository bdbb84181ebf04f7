package kubelet

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func svc(ns, name, ip string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

func TestServiceEnv(t *testing.T) {
	services := []*corev1.Service{
		svc("default", "kubernetes", "10.96.0.1", corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}),
		svc("default", "other", "10.96.0.9", corev1.ServicePort{Port: 80}),
		svc("shop", "my-backend", "10.96.0.20",
			corev1.ServicePort{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP},
			corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}),
		svc("shop", "headless", corev1.ClusterIPNone, corev1.ServicePort{Port: 80}),
		svc("shop", "external", ""),
	}
	got := serviceEnv("shop", true, services)
	want := map[string]string{
		"KUBERNETES_SERVICE_HOST":       "10.96.0.1",
		"KUBERNETES_SERVICE_PORT":       "443",
		"KUBERNETES_SERVICE_PORT_HTTPS": "443",
		"KUBERNETES_PORT":               "tcp://10.96.0.1:443",
		"KUBERNETES_PORT_443_TCP":       "tcp://10.96.0.1:443",
		"KUBERNETES_PORT_443_TCP_PROTO": "tcp",
		"KUBERNETES_PORT_443_TCP_PORT":  "443",
		"KUBERNETES_PORT_443_TCP_ADDR":  "10.96.0.1",

		"MY_BACKEND_SERVICE_HOST":        "10.96.0.20",
		"MY_BACKEND_SERVICE_PORT":        "8080",
		"MY_BACKEND_SERVICE_PORT_HTTP":   "8080",
		"MY_BACKEND_SERVICE_PORT_DNS":    "53",
		"MY_BACKEND_PORT":                "tcp://10.96.0.20:8080",
		"MY_BACKEND_PORT_8080_TCP":       "tcp://10.96.0.20:8080",
		"MY_BACKEND_PORT_8080_TCP_PROTO": "tcp",
		"MY_BACKEND_PORT_8080_TCP_PORT":  "8080",
		"MY_BACKEND_PORT_8080_TCP_ADDR":  "10.96.0.20",
		"MY_BACKEND_PORT_53_UDP":         "udp://10.96.0.20:53",
		"MY_BACKEND_PORT_53_UDP_PROTO":   "udp",
		"MY_BACKEND_PORT_53_UDP_PORT":    "53",
		"MY_BACKEND_PORT_53_UDP_ADDR":    "10.96.0.20",
	}
	if len(got) != len(want) {
		t.Errorf("got %d variables, want %d: %v", len(got), len(want), got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}

	// enableServiceLinks: false keeps only the API server's Service.
	got = serviceEnv("shop", false, services)
	if len(got) != 8 || got["KUBERNETES_SERVICE_HOST"] != "10.96.0.1" || got["MY_BACKEND_SERVICE_HOST"] != "" {
		t.Errorf("without service links: %v", got)
	}

	// In the default namespace every Service there counts; a namespace's own Service named
	// kubernetes wins over the default one.
	if got := serviceEnv("default", true, services); got["OTHER_SERVICE_HOST"] != "10.96.0.9" || got["KUBERNETES_SERVICE_HOST"] != "10.96.0.1" {
		t.Errorf("default namespace: %v", got)
	}
	own := append([]*corev1.Service{svc("shop", "kubernetes", "10.96.0.77", corev1.ServicePort{Port: 8443})}, services...)
	if got := serviceEnv("shop", true, own); got["KUBERNETES_SERVICE_HOST"] != "10.96.0.77" || got["KUBERNETES_SERVICE_PORT"] != "8443" {
		t.Errorf("own kubernetes Service: %v", got)
	}

	// IPv6 addresses are bracketed in the link variables.
	if got := serviceVars(svc("shop", "v6", "fd00::10", corev1.ServicePort{Port: 80})); got["V6_PORT"] != "tcp://[fd00::10]:80" {
		t.Errorf("IPv6: %v", got)
	}
}
