package proxy

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// stateOf computes the state of svc with the given slices.
func stateOf(svc *v1.Service, slices ...*discovery.EndpointSlice) *ServiceState {
	return ComputeServiceState(svc, slices, testParams)
}

func requireState(t *testing.T, got, want *ServiceState) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("state:\n%s\nwant:\n%s", describe(got), describe(want))
	}
}

func describe(st *ServiceState) string {
	if st == nil {
		return "<nil>"
	}
	var b strings.Builder
	for _, c := range st.Chains {
		b.WriteString("chain " + c.Name + "\n")
		for _, r := range c.Rules {
			b.WriteString("  " + r + "\n")
		}
	}
	for _, m := range st.Maps {
		b.WriteString("map " + m.Name + " " + m.Type + ": " + strings.Join(m.Values, ", ") + "\n")
	}
	for _, s := range st.Sets {
		b.WriteString("set " + s.Name + " " + s.Timeout.String() + "\n")
	}
	for _, e := range st.Elements {
		b.WriteString("element " + e.id() + " : " + e.Value + " # " + e.Comment + fmt.Sprintf(" shared=%v", e.Shared) + "\n")
	}
	return b.String()
}

func TestComputeClusterIP(t *testing.T) {
	svc := makeService("ns", "web", "10.96.0.10")
	slice := makeSlice(svc, "web-1", 8080, ep{ip: "10.244.2.2"}, ep{ip: "10.244.1.2"}, ep{ip: "10.244.1.3", notReady: true})
	svcChain := chainName(clusterChainPrefix, "ns", "web")
	want := &ServiceState{
		Chains: []Chain{{Name: svcChain, Rules: []string{
			"meta l4proto tcp dnat ip addr . port to numgen random mod 2 map @" + dnatMapName(svcChain),
		}}},
		Maps: []LBMap{{Name: dnatMapName(svcChain), Type: "ip daddr . tcp dport",
			Values: []string{"10.244.1.2 . 8080", "10.244.2.2 . 8080"}}},
		Elements: []Element{
			{Set: "cluster-ips", Key: []string{"10.96.0.10"}},
			{Map: "service-ips", Key: []string{"10.96.0.10", "tcp", "80"}, Value: "goto " + svcChain},
			{Set: "hairpin", Key: []string{"10.244.1.2", "10.244.1.2"}, Shared: true},
			{Set: "hairpin", Key: []string{"10.244.2.2", "10.244.2.2"}, Shared: true},
		},
	}
	requireState(t, stateOf(svc, slice), want)
}

func TestComputeNodePort(t *testing.T) {
	svc := makeService("ns", "web", "10.96.0.10", nodePort(30080))
	slice := makeSlice(svc, "web-1", 8080, ep{ip: "10.244.1.2", node: "other"})
	st := stateOf(svc, slice)
	svcChain := chainName(clusterChainPrefix, "ns", "web")
	ext := chainName(externalChainPrefix, "ns", "web")
	if got := chainRules(st, ext); !reflect.DeepEqual(got, []string{"jump mark-for-masquerade", "goto " + svcChain}) {
		t.Errorf("external chain = %q", got)
	}
	requireElement(t, st, Element{Map: "service-nodeports", Key: []string{"tcp", "30080"}, Value: "goto " + ext})
	requireElement(t, st, Element{Map: "service-ips", Key: []string{"10.96.0.10", "tcp", "80"}, Value: "goto " + svcChain})
	if len(st.Chains) != 2 {
		t.Errorf("chains:\n%s", describe(st))
	}
}

func TestComputeNodePortLocal(t *testing.T) {
	svc := makeService("ns", "web", "10.96.0.10", nodePort(30080), externalLocal)
	svcChain := chainName(clusterChainPrefix, "ns", "web")
	localChain := chainName(localChainPrefix, "ns", "web")
	ext := chainName(externalChainPrefix, "ns", "web")

	st := stateOf(svc, makeSlice(svc, "web-1", 8080, ep{ip: "10.244.1.2", node: "other"}, ep{ip: "10.244.2.2", node: testNode}))
	if got := chainRules(st, ext); !reflect.DeepEqual(got, []string{
		"ip saddr 10.244.0.0/16 goto " + svcChain,
		"fib saddr type local jump mark-for-masquerade",
		"fib saddr type local goto " + svcChain,
		"goto " + localChain,
	}) {
		t.Errorf("external chain = %q", got)
	}
	// The local chain balances over this node's endpoint only and does not masquerade.
	if got := chainRules(st, localChain); !reflect.DeepEqual(got, []string{
		"meta l4proto tcp dnat ip addr . port to numgen random mod 1 map @" + dnatMapName(localChain)}) {
		t.Errorf("local chain = %q", got)
	}
	if m := mapOf(st, dnatMapName(localChain)); !reflect.DeepEqual(m, []string{"10.244.2.2 . 8080"}) {
		t.Errorf("local map = %q", m)
	}
	if m := mapOf(st, dnatMapName(svcChain)); !reflect.DeepEqual(m, []string{"10.244.1.2 . 8080", "10.244.2.2 . 8080"}) {
		t.Errorf("cluster map = %q", m)
	}

	// No endpoint here: NodePort traffic from outside is dropped (not rejected: other
	// nodes have endpoints); the ClusterIP and the short-circuits still work.
	st = stateOf(svc, makeSlice(svc, "web-1", 8080, ep{ip: "10.244.1.2", node: "other"}))
	requireElement(t, st, Element{Map: "no-endpoint-nodeports", Key: []string{"tcp", "30080"}, Value: "drop", Comment: "ns/web:http"})
	requireElement(t, st, Element{Map: "service-nodeports", Key: []string{"tcp", "30080"}, Value: "goto " + ext})
	requireElement(t, st, Element{Map: "service-ips", Key: []string{"10.96.0.10", "tcp", "80"}, Value: "goto " + svcChain})
	if got := chainRules(st, ext); len(got) != 3 || strings.Contains(strings.Join(got, "\n"), localChain) {
		t.Errorf("external chain without local endpoints = %q", got)
	}
	if chainRules(st, localChain) != nil {
		t.Errorf("local chain exists without local endpoints")
	}
}

func TestComputeInternalLocal(t *testing.T) {
	svc := makeService("ns", "web", "10.96.0.10", func(s *v1.Service) {
		s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
	})
	localChain := chainName(localChainPrefix, "ns", "web")
	st := stateOf(svc, makeSlice(svc, "web-1", 8080, ep{ip: "10.244.1.2", node: "other"}, ep{ip: "10.244.2.2", node: testNode}))
	requireElement(t, st, Element{Map: "service-ips", Key: []string{"10.96.0.10", "tcp", "80"}, Value: "goto " + localChain})
	if len(st.Chains) != 1 {
		t.Errorf("want the local chain alone:\n%s", describe(st))
	}
	st = stateOf(svc, makeSlice(svc, "web-1", 8080, ep{ip: "10.244.1.2", node: "other"}))
	requireElement(t, st, Element{Map: "no-endpoint-services", Key: []string{"10.96.0.10", "tcp", "80"}, Value: "drop", Comment: "ns/web:http"})
	if len(st.Chains) != 0 {
		t.Errorf("want no chains:\n%s", describe(st))
	}
}

func TestComputeAffinity(t *testing.T) {
	for _, c := range []struct {
		seconds int32
		want    time.Duration
	}{{0, 10800 * time.Second}, {30, 30 * time.Second}} {
		svc := makeService("ns", "web", "10.96.0.10", affinity(c.seconds))
		st := stateOf(svc, makeSlice(svc, "web-1", 8080, ep{ip: "10.244.1.2"}, ep{ip: "10.244.2.2"}))
		svcChain := chainName(clusterChainPrefix, "ns", "web")
		ep1, ep2 := endpointChain("ns", "web", "10.244.1.2:8080"), endpointChain("ns", "web", "10.244.2.2:8080")
		set1, set2 := affinitySetName("ns", "web", "10.244.1.2:8080"), affinitySetName("ns", "web", "10.244.2.2:8080")
		if !reflect.DeepEqual(st.Sets, []AffinitySet{{Name: set1, Timeout: c.want}, {Name: set2, Timeout: c.want}}) {
			t.Errorf("timeout %d: sets = %+v", c.seconds, st.Sets)
		}
		if got := chainRules(st, svcChain); !reflect.DeepEqual(got, []string{
			"ip saddr @" + set1 + " goto " + ep1,
			"ip saddr @" + set2 + " goto " + ep2,
			"numgen random mod 2 vmap @lb-" + svcChain,
		}) {
			t.Errorf("service chain = %q", got)
		}
		if got := chainRules(st, ep1); !reflect.DeepEqual(got, []string{
			"update @" + set1 + " { ip saddr }",
			"meta l4proto tcp dnat to 10.244.1.2:8080",
		}) {
			t.Errorf("endpoint chain = %q", got)
		}
	}
}

func TestComputeNoEndpoints(t *testing.T) {
	svc := makeService("ns", "web", "10.96.0.10", nodePort(30080))
	for name, slices := range map[string][]*discovery.EndpointSlice{
		"no slice":   nil,
		"none ready": {makeSlice(svc, "web-1", 8080, ep{ip: "10.244.1.2", notReady: true})},
		"terminating, not serving": {makeSlice(svc, "web-1", 8080,
			ep{ip: "10.244.1.2", notReady: true, terminating: true, notServing: true})},
	} {
		t.Run(name, func(t *testing.T) {
			st := stateOf(svc, slices...)
			requireState(t, st, &ServiceState{Elements: []Element{
				{Set: "cluster-ips", Key: []string{"10.96.0.10"}},
				{Map: "no-endpoint-services", Key: []string{"10.96.0.10", "tcp", "80"}, Value: "goto reject-chain", Comment: "ns/web:http"},
				{Map: "no-endpoint-nodeports", Key: []string{"tcp", "30080"}, Value: "goto reject-chain", Comment: "ns/web:http"},
			}})
		})
	}
	// Serving endpoints that terminate stand in when none is ready.
	st := stateOf(svc, makeSlice(svc, "web-1", 8080, ep{ip: "10.244.1.2", notReady: true, terminating: true}))
	requireElement(t, st, Element{Map: "service-ips", Key: []string{"10.96.0.10", "tcp", "80"},
		Value: "goto " + chainName(clusterChainPrefix, "ns", "web")})
}

func TestComputeUDPAndTwoPorts(t *testing.T) {
	svc := makeService("kube-system", "kube-dns", "10.96.0.10", func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{
			{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53},
			{Name: "dns-tcp", Protocol: v1.ProtocolTCP, Port: 53},
		}
	})
	slice := makeSlice(svc, "kube-dns-1", 53, ep{ip: "172.31.0.2"})
	slice.Ports = []discovery.EndpointPort{
		{Name: ptr.To("dns"), Protocol: ptr.To(v1.ProtocolUDP), Port: ptr.To[int32](53)},
		{Name: ptr.To("dns-tcp"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](1053)},
	}
	st := stateOf(svc, slice)
	udpChain := clusterChainPrefix + hashed("kube-system/kube-dns/udp/dns")
	tcpChain := clusterChainPrefix + hashed("kube-system/kube-dns/tcp/dns-tcp")
	requireElement(t, st, Element{Map: "service-ips", Key: []string{"10.96.0.10", "udp", "53"}, Value: "goto " + udpChain})
	requireElement(t, st, Element{Map: "service-ips", Key: []string{"10.96.0.10", "tcp", "53"}, Value: "goto " + tcpChain})
	if got := mapOf(st, dnatMapName(udpChain)); !reflect.DeepEqual(got, []string{"172.31.0.2 . 53"}) {
		t.Errorf("udp map = %q", got)
	}
	if got := mapOf(st, dnatMapName(tcpChain)); !reflect.DeepEqual(got, []string{"172.31.0.2 . 1053"}) {
		t.Errorf("tcp map = %q", got)
	}
	if got := chainRules(st, udpChain); len(got) != 1 || got[0] != "meta l4proto udp dnat ip addr . port to numgen random mod 1 map @"+dnatMapName(udpChain) {
		t.Errorf("udp chain = %q", got)
	}
	for _, m := range st.Maps {
		want := map[string]string{dnatMapName(udpChain): "ip daddr . udp dport", dnatMapName(tcpChain): "ip daddr . tcp dport"}[m.Name]
		if m.Type != want {
			t.Errorf("map %s of type %q, want %q", m.Name, m.Type, want)
		}
	}
	// One hairpin element for the endpoint both ports share.
	if n := len(st.Elements); n != 4 {
		t.Errorf("%d elements, want one ClusterIP, two service-ips and one hairpin:\n%s", n, describe(st))
	}
}

func sortedChains(cs ...Chain) []Chain {
	slices.SortFunc(cs, func(a, b Chain) int { return strings.Compare(a.Name, b.Name) })
	return cs
}

func chainRules(st *ServiceState, name string) []string {
	for _, c := range st.Chains {
		if c.Name == name {
			return c.Rules
		}
	}
	return nil
}

func mapOf(st *ServiceState, name string) []string {
	for _, m := range st.Maps {
		if m.Name == name {
			return m.Values
		}
	}
	return nil
}

func requireElement(t *testing.T, st *ServiceState, want Element) {
	t.Helper()
	for _, e := range st.Elements {
		if reflect.DeepEqual(e, want) {
			return
		}
	}
	t.Errorf("no element %s : %s in\n%s", want.id(), want.Value, describe(st))
}
