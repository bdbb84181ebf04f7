package proxy

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

const (
	testNode    = "node-a"
	testCluster = "10.244.0.0/16"
)

var testParams = Params{NodeName: testNode, ClusterCIDR: testCluster}

// svcOpt changes a test Service.
type svcOpt func(*v1.Service)

// makeService is a ClusterIP Service with one TCP port "http" 80 → targetPort "web".
func makeService(ns, name, clusterIP string, opts ...svcOpt) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeClusterIP,
			ClusterIP:  clusterIP,
			ClusterIPs: []string{clusterIP},
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80,
				TargetPort: intstr.FromString("web")}},
		},
	}
	for _, o := range opts {
		o(svc)
	}
	return svc
}

func nodePort(np int32) svcOpt {
	return func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.Ports[0].NodePort = np
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
	}
}

func externalLocal(s *v1.Service) {
	s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
}

func affinity(seconds int32) svcOpt {
	return func(s *v1.Service) {
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		if seconds > 0 {
			s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To(seconds)}}
		}
	}
}

// ep is a test endpoint: address, node, and conditions.
type ep struct {
	ip          string
	node        string
	notReady    bool
	terminating bool
	notServing  bool
}

// makeSlice is an IPv4 EndpointSlice of svc whose port "http" is targetPort.
func makeSlice(svc *v1.Service, name string, targetPort int32, eps ...ep) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: name,
			Labels: map[string]string{discovery.LabelServiceName: svc.Name}},
		AddressType: discovery.AddressTypeIPv4,
		Ports: []discovery.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP),
			Port: ptr.To(targetPort)}},
	}
	for _, e := range eps {
		de := discovery.Endpoint{
			Addresses: []string{e.ip},
			Conditions: discovery.EndpointConditions{
				Ready:       ptr.To(!e.notReady),
				Serving:     ptr.To(!e.notServing),
				Terminating: ptr.To(e.terminating),
			},
		}
		if e.node != "" {
			de.NodeName = ptr.To(e.node)
		}
		s.Endpoints = append(s.Endpoints, de)
	}
	return s
}

func nn(svc *v1.Service) types.NamespacedName {
	return types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
}

// chainName is the name of the chain prefix+base of the Service port (ns/name, tcp, http).
func chainName(prefix, ns, name string) string {
	return prefix + hashed(ns+"/"+name+"/tcp/http")
}

// endpointChain is the endpoint chain of ip:port for the Service port (ns/name, tcp, http).
func endpointChain(ns, name, ipPort string) string {
	return endpointChainPrefix + hashed(fmt.Sprintf("%s/%s/tcp/http__%s", ns, name, strings.Replace(ipPort, ":", "/", 1)))
}

func affinitySetName(ns, name, ipPort string) string {
	return affinitySetPrefix + strings.TrimPrefix(endpointChain(ns, name, ipPort), endpointChainPrefix)
}

// dumpLines are the lines of the fake's dump.
func dumpLines(fake *knftables.Fake) map[string]bool {
	lines := map[string]bool{}
	for _, l := range strings.Split(fake.Dump(), "\n") {
		if l != "" {
			lines[l] = true
		}
	}
	return lines
}

// requireLines fails unless the dump has every line of want.
func requireLines(t *testing.T, fake *knftables.Fake, want ...string) {
	t.Helper()
	lines := dumpLines(fake)
	for _, w := range want {
		if !lines[w] {
			t.Errorf("dump lacks\n  %s\ndump:\n%s", w, fake.Dump())
			return
		}
	}
}

// forbidLines fails if the dump has a line containing any of the strings.
func forbidLines(t *testing.T, fake *knftables.Fake, substrings ...string) {
	t.Helper()
	for l := range dumpLines(fake) {
		for _, s := range substrings {
			if strings.Contains(l, s) {
				t.Errorf("dump has %q in\n  %s", s, l)
			}
		}
	}
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
