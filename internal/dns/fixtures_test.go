package dns

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	mdns "github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func port(name string, p int32, proto corev1.Protocol) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: p, Protocol: proto}
}

// clusterIPService is a Service with ClusterIPs ips.
func clusterIPService(ns, name string, ips []string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ips[0], ClusterIPs: ips, Ports: ports}}
}

func headlessService(ns, name string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: corev1.ClusterIPNone,
			ClusterIPs: []string{corev1.ClusterIPNone}, Ports: ports}}
}

func externalService(ns, name, external string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: external}}
}

// ep is an endpoint of a slice: address, hostname ("" for none) and readiness (nil for
// unknown).
type ep struct {
	addr, hostname string
	ready          *bool
}

var (
	yes = new(true)
	no  = new(false)
)

func slicePort(name string, p int32, proto corev1.Protocol) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: &name, Port: &p, Protocol: &proto}
}

// slice is an EndpointSlice of Service ns/svc.
func slice(ns, svc, name string, family discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: family, Ports: ports,
	}
	for _, e := range eps {
		end := discoveryv1.Endpoint{Addresses: []string{e.addr}, Conditions: discoveryv1.EndpointConditions{Ready: e.ready}}
		if e.hostname != "" {
			end.Hostname = new(e.hostname)
		}
		s.Endpoints = append(s.Endpoints, end)
	}
	return s
}

// fixture is the cluster most tests ask about.
func fixture() []runtime.Object {
	return []runtime.Object{
		namespace("default"), namespace("db"), namespace("kube-system"),
		clusterIPService("default", "web", []string{"10.96.0.20"}, port("http", 80, corev1.ProtocolTCP),
			port("metrics", 9090, ""), port("syslog", 514, corev1.ProtocolUDP)),
		slice("default", "web", "web-abc", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{slicePort("http", 8080, corev1.ProtocolTCP)},
			ep{addr: "10.244.1.10", ready: yes}),
		clusterIPService("default", "dual", []string{"10.96.0.30", "fd00::30"}, port("http", 80, corev1.ProtocolTCP)),
		clusterIPService("kube-system", "kube-dns", []string{"10.96.0.10"}, port("dns", 53, corev1.ProtocolUDP),
			port("dns-tcp", 53, corev1.ProtocolTCP)),
		headlessService("db", "pg", port("postgres", 5432, corev1.ProtocolTCP)),
		slice("db", "pg", "pg-1", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{slicePort("postgres", 5432, corev1.ProtocolTCP)},
			ep{addr: "10.244.1.5", hostname: "pg-0", ready: yes}, ep{addr: "10.244.2.6", hostname: "pg-1", ready: yes},
			ep{addr: "10.244.4.8", hostname: "pg-2", ready: no}),
		slice("db", "pg", "pg-2", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{slicePort("postgres", 5432, corev1.ProtocolTCP)},
			ep{addr: "10.244.3.7"}),
		headlessService("db", "empty"),
		headlessService("db", "noports"),
		slice("db", "noports", "noports-1", discoveryv1.AddressTypeIPv4, nil, ep{addr: "10.244.5.9", ready: yes}),
		externalService("default", "ext", "Example.com"),
		externalService("default", "alias", "web.default.svc.cluster.local"),
		externalService("default", "loop", "loop.default.svc.cluster.local."),
		externalService("default", "ipext", "1.2.3.4"),
	}
}

// testResolver is a resolver over a catalog holding objs.
func testResolver(t testing.TB, objs ...runtime.Object) *resolver {
	t.Helper()
	cat := newCatalog()
	for _, o := range objs {
		var err error
		switch o.(type) {
		case *corev1.Namespace:
			err = cat.namespaces.Add(o)
		case *corev1.Service:
			err = cat.services.Add(o)
		case *discoveryv1.EndpointSlice:
			err = cat.slices.Add(o)
		default:
			err = fmt.Errorf("unexpected %T", o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return &resolver{domain: "cluster.local.", ttl: 5, cat: cat, serial: func() uint32 { return 42 },
		listen: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}
}

// rrs formats records as "<name> <type> <data>" (no TTL nor class), sorted.
func rrs(records []mdns.RR) []string {
	var out []string
	for _, rr := range records {
		f := strings.Fields(rr.String())
		out = append(out, strings.Join(append([]string{f[0], f[3]}, f[4:]...), " "))
	}
	slices.Sort(out)
	return out
}
