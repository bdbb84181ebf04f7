package proxy

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

func TestStaleUDPFlows(t *testing.T) {
	svc := makeService("kube-system", "dns", "10.96.0.10", nodePort(30053), func(s *v1.Service) {
		s.Spec.Ports[0].Protocol = v1.ProtocolUDP
	})
	slice := func(eps ...ep) *discovery.EndpointSlice {
		s := makeSlice(svc, "dns-1", 53, eps...)
		s.Ports[0].Protocol = ptr.To(v1.ProtocolUDP)
		return s
	}
	none := stateOf(svc, slice(ep{ip: "10.244.1.2", notReady: true}))
	two := stateOf(svc, slice(ep{ip: "10.244.1.2"}, ep{ip: "10.244.2.2"}))
	one := stateOf(svc, slice(ep{ip: "10.244.1.2"}, ep{ip: "10.244.2.2", notReady: true}))
	tcp := stateOf(makeService("ns", "web", "10.96.0.11"), makeSlice(makeService("ns", "web", "10.96.0.11"), "web-1", 80, ep{ip: "10.244.1.3"}))

	for _, c := range []struct {
		name     string
		old, cur *ServiceState
		want     []staleFlow
	}{
		{"first endpoints: what was rejected goes", none, two, []staleFlow{{Port: 30053}, {IP: "10.96.0.10", Port: 80}}},
		{"new Service with endpoints", nil, two, []staleFlow{{Port: 30053}, {IP: "10.96.0.10", Port: 80}}},
		{"an endpoint goes", two, one, []staleFlow{{Port: 30053, Endpoint: "10.244.2.2"}, {IP: "10.96.0.10", Port: 80, Endpoint: "10.244.2.2"}}},
		{"the Service goes", one, nil, []staleFlow{{Port: 30053, Endpoint: "10.244.1.2"}, {IP: "10.96.0.10", Port: 80, Endpoint: "10.244.1.2"}}},
		{"the last endpoint goes", one, none, []staleFlow{{Port: 30053, Endpoint: "10.244.1.2"}, {IP: "10.96.0.10", Port: 80, Endpoint: "10.244.1.2"}}},
		{"an endpoint comes", one, two, nil},
		{"unchanged", two, two, nil},
		{"TCP", nil, tcp, nil},
	} {
		if got := staleUDPFlows(c.old, c.cur); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
