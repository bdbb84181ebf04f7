package proxy

import (
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

func TestServicesThatGetNothing(t *testing.T) {
	cases := map[string]*v1.Service{
		"ExternalName": makeService("ns", "a", "", func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeExternalName
			s.Spec.ExternalName = "example.com"
		}),
		"headless":     makeService("ns", "a", v1.ClusterIPNone),
		"no ClusterIP": makeService("ns", "a", ""),
		"IPv6 only":    makeService("ns", "a", "fd00::10"),
		"other proxy": makeService("ns", "a", "10.96.0.10", func(s *v1.Service) {
			s.Labels = map[string]string{serviceProxyNameLabel: "other"}
		}),
		"no ports": makeService("ns", "a", "10.96.0.10", func(s *v1.Service) { s.Spec.Ports = nil }),
	}
	for name, svc := range cases {
		t.Run(name, func(t *testing.T) {
			slice := makeSlice(svc, "a-1", 8080, ep{ip: "10.244.1.2"})
			if st := ComputeServiceState(svc, []*discovery.EndpointSlice{slice}, testParams); st != nil {
				t.Errorf("state = %+v, want none", st)
			}
		})
	}
	if st := ComputeServiceState(nil, nil, testParams); st != nil {
		t.Errorf("nil Service: state = %+v, want none", st)
	}
}

func TestServicePorts(t *testing.T) {
	svc := makeService("ns", "a", "10.96.0.10", nodePort(30080), externalLocal, affinity(0), func(s *v1.Service) {
		s.Spec.ClusterIPs = []string{"10.96.0.10", "fd00::10"}
		s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
		s.Spec.Ports = append(s.Spec.Ports,
			v1.ServicePort{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53},
			v1.ServicePort{Name: "sctp", Protocol: v1.ProtocolSCTP, Port: 9},
			v1.ServicePort{Name: "noproto", Port: 81})
	})
	ports := servicePorts(svc)
	if len(ports) != 4 {
		t.Fatalf("got %d ports, want 4: %+v", len(ports), ports)
	}
	p := ports[0]
	if p.clusterIP.String() != "10.96.0.10" || p.port != 80 || p.nodePort != 30080 || p.protocol != v1.ProtocolTCP ||
		p.affinity != defaultAffinityTimeout || !p.externalLocal || !p.internalLocal {
		t.Errorf("port 0 = %+v", p)
	}
	if ports[1].protocol != v1.ProtocolUDP || ports[2].protocol != v1.ProtocolSCTP || ports[3].protocol != v1.ProtocolTCP {
		t.Errorf("protocols = %v %v %v, want UDP SCTP TCP", ports[1].protocol, ports[2].protocol, ports[3].protocol)
	}
	if ports[1].nodePort != 0 {
		t.Errorf("port without nodePort got %d", ports[1].nodePort)
	}

	// A ClusterIP Service has no NodePort even if a stale one is set; Local external
	// policy means nothing without one.
	cip := makeService("ns", "b", "10.96.0.11", externalLocal, func(s *v1.Service) { s.Spec.Ports[0].NodePort = 30001 })
	if p := servicePorts(cip)[0]; p.nodePort != 0 || p.externalLocal {
		t.Errorf("ClusterIP Service port = %+v, want no NodePort and no Local policy", p)
	}
	custom := makeService("ns", "c", "10.96.0.12", affinity(60))
	if p := servicePorts(custom)[0]; p.affinity.Seconds() != 60 {
		t.Errorf("affinity = %v, want 60s", p.affinity)
	}
}

func TestEndpointsFor(t *testing.T) {
	svc := makeService("ns", "a", "10.96.0.10")
	sp := &servicePort{namespace: "ns", name: "a", portName: "http", protocol: v1.ProtocolTCP}

	// The Service's targetPort is the name "web"; the slice carries its number.
	s1 := makeSlice(svc, "a-1", 8080,
		ep{ip: "10.244.2.2", node: testNode},
		ep{ip: "10.244.1.2", notReady: true},
		ep{ip: "10.244.1.3"})
	// The same endpoint in a second slice: the ready view wins.
	s2 := makeSlice(svc, "a-2", 8080, ep{ip: "10.244.1.2"})
	other := makeSlice(makeService("ns", "other", "10.96.0.11"), "o-1", 8080, ep{ip: "10.244.9.9"})
	v6 := makeSlice(svc, "a-3", 8080, ep{ip: "fd00::1"})
	v6.AddressType = discovery.AddressTypeIPv6
	udp := makeSlice(svc, "a-4", 8080, ep{ip: "10.244.8.8"})
	udp.Ports[0].Protocol = ptr.To(v1.ProtocolUDP)
	otherPort := makeSlice(svc, "a-5", 9090, ep{ip: "10.244.7.7"})
	otherPort.Ports[0].Name = ptr.To("metrics")
	noPort := makeSlice(svc, "a-6", 0, ep{ip: "10.244.6.6"})
	noPort.Ports[0].Port = nil

	eps := endpointsFor(sp, []*discovery.EndpointSlice{s1, s2, other, v6, udp, otherPort, noPort, nil}, testNode)
	var got []string
	for _, e := range eps {
		got = append(got, e.String())
		if !e.ready {
			t.Errorf("%s not ready, want the ready duplicate", e)
		}
		if e.local != (e.ip.String() == "10.244.2.2") {
			t.Errorf("%s local = %v", e, e.local)
		}
	}
	want := []string{"10.244.1.2:8080", "10.244.1.3:8080", "10.244.2.2:8080"}
	if !slices.Equal(got, want) {
		t.Errorf("endpoints = %v, want %v", got, want)
	}
}

func TestCategorizeEndpoints(t *testing.T) {
	e := func(ip string, ready, serving, terminating, local bool) endpoint {
		return endpoint{ip: netip.MustParseAddr(ip), port: 80, ready: ready, serving: serving, terminating: terminating, local: local}
	}
	readyRemote := e("10.0.0.1", true, true, false, false)
	readyLocal := e("10.0.0.2", true, true, false, true)
	termRemote := e("10.0.0.3", false, true, true, false)
	termLocal := e("10.0.0.4", false, true, true, true)
	notServing := e("10.0.0.5", false, false, true, true)
	notReady := e("10.0.0.6", false, false, false, true)

	cluster := servicePort{}
	extLocal := servicePort{nodePort: 30000, externalLocal: true}
	intLocal := servicePort{internalLocal: true}

	cases := []struct {
		name                      string
		sp                        servicePort
		eps                       []endpoint
		cluster, local, reachable []endpoint
		hasAny                    bool
	}{
		{"ready only", cluster, []endpoint{readyRemote, termRemote, notReady}, []endpoint{readyRemote}, nil, []endpoint{readyRemote}, true},
		{"terminating fallback", cluster, []endpoint{termRemote, notServing, notReady}, []endpoint{termRemote}, nil, []endpoint{termRemote}, true},
		{"nothing usable", cluster, []endpoint{notServing, notReady}, nil, nil, nil, false},
		{"external Local", extLocal, []endpoint{readyRemote, readyLocal, termLocal},
			[]endpoint{readyRemote, readyLocal}, []endpoint{readyLocal}, []endpoint{readyRemote, readyLocal}, true},
		{"external Local, terminating local", extLocal, []endpoint{readyRemote, termLocal},
			[]endpoint{readyRemote}, []endpoint{termLocal}, []endpoint{readyRemote, termLocal}, true},
		{"external Local, none local", extLocal, []endpoint{readyRemote}, []endpoint{readyRemote}, nil, []endpoint{readyRemote}, true},
		{"internal Local", intLocal, []endpoint{readyRemote, readyLocal}, nil, []endpoint{readyLocal}, []endpoint{readyLocal}, true},
		{"internal Local, none local", intLocal, []endpoint{readyRemote}, nil, nil, nil, true},
	}
	str := func(eps []endpoint) []string {
		var out []string
		for _, e := range eps {
			out = append(out, e.String())
		}
		return out
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl, lo, re, any := categorizeEndpoints(c.eps, &c.sp)
			if !slices.Equal(str(cl), str(c.cluster)) || !slices.Equal(str(lo), str(c.local)) ||
				!slices.Equal(str(re), str(c.reachable)) || any != c.hasAny {
				t.Errorf("got cluster %v local %v reachable %v hasAny %v; want %v %v %v %v",
					str(cl), str(lo), str(re), any, str(c.cluster), str(c.local), str(c.reachable), c.hasAny)
			}
		})
	}
}
