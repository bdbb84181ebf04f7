package netpol

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// dumpRuleset prints rs in a stable order, for comparisons.
func dumpRuleset(rs *Ruleset) string {
	var b strings.Builder
	for _, name := range sortedKeys(rs.Chains) {
		fmt.Fprintf(&b, "chain %s\n", name)
		for _, r := range rs.Chains[name] {
			fmt.Fprintf(&b, "  %s\n", r)
		}
	}
	for _, name := range sortedKeys(rs.Sets) {
		s := rs.Sets[name]
		fmt.Fprintf(&b, "set %s %s interval=%v\n", name, s.Type, s.Interval)
		for _, e := range s.Elements {
			fmt.Fprintf(&b, "  %s\n", strings.Join(e, " . "))
		}
	}
	for _, addr := range sortedKeys(rs.Ingress) {
		fmt.Fprintf(&b, "ingress %s : %s\n", addr, rs.Ingress[addr])
	}
	for _, addr := range sortedKeys(rs.Egress) {
		fmt.Fprintf(&b, "egress %s : %s\n", addr, rs.Egress[addr])
	}
	return b.String()
}

func TestRender(t *testing.T) {
	in := testCluster()
	in.Policies = []*networkingv1.NetworkPolicy{
		withIngress(mkPolicy("default", "web", sel("app", "b"), ingressT),
			networkingv1.NetworkPolicyIngressRule{
				From:  []networkingv1.NetworkPolicyPeer{podPeer(sel("app", "a")), blockPeer("10.244.2.0/24", ipY+"/32")},
				Ports: []networkingv1.NetworkPolicyPort{numPort(tcp, 9090), rangePort(udp, 1000, 1010)},
			},
			networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{namedPolicyPort(tcp, "http"), protoOnly(sctp)}},
			networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{namedPolicyPort(tcp, "missing")}},
		),
		withEgress(mkPolicy("default", "out", sel("app", "a"), egressT),
			networkingv1.NetworkPolicyEgressRule{
				To:    []networkingv1.NetworkPolicyPeer{nsPeer(sel("team", "b"))},
				Ports: []networkingv1.NetworkPolicyPort{namedPolicyPort(tcp, "http"), numPort(udp, 53)},
			},
			networkingv1.NetworkPolicyEgressRule{},
		),
	}
	got := dumpRuleset(Render(Compute(in)))
	want := `chain egress-default/a
  ip daddr 10.244.1.10 return
  ip daddr @peers-default/out-egress-0 meta l4proto udp th dport 53 return
  ip daddr . meta l4proto . th dport @named-default/out-egress-0 return
  return
  drop
chain ingress-default/b
  ip saddr 10.244.1.11 return
  ip saddr @peers-default/web-ingress-0 meta l4proto tcp th dport 9090 return
  ip saddr @peers-default/web-ingress-0 meta l4proto udp th dport 1000-1010 return
  ip saddr @blocks-default/web-ingress-0 meta l4proto tcp th dport 9090 return
  ip saddr @blocks-default/web-ingress-0 meta l4proto udp th dport 1000-1010 return
  meta l4proto tcp th dport 9090 return
  meta l4proto sctp return
  drop
set blocks-default/web-ingress-0 ipv4_addr interval=true
  10.244.2.0/28
  10.244.2.11/32
set named-default/out-egress-0 ipv4_addr . inet_proto . inet_service interval=false
  10.244.2.10 . tcp . 7070
set peers-default/out-egress-0 ipv4_addr interval=false
  10.244.2.10
  10.244.2.11
set peers-default/web-ingress-0 ipv4_addr interval=false
  10.244.1.10
ingress 10.244.1.11 : ingress-default/b
egress 10.244.1.10 : egress-default/a
`
	// The except of 10.244.2.11 leaves 10.244.2.0-10 and 12-255: check the prefixes
	// separately, they are many.
	blocks := Render(Compute(in)).Sets["blocks-default/web-ingress-0"]
	var prefixes []string
	for _, e := range blocks.Elements {
		prefixes = append(prefixes, e[0])
	}
	wantPrefixes := []string{"10.244.2.0/29", "10.244.2.8/31", "10.244.2.10/32", "10.244.2.12/30", "10.244.2.16/28",
		"10.244.2.32/27", "10.244.2.64/26", "10.244.2.128/25"}
	if !slices.Equal(prefixes, wantPrefixes) {
		t.Errorf("blocks = %v, want %v", prefixes, wantPrefixes)
	}
	want = strings.Replace(want, "  10.244.2.0/28\n  10.244.2.11/32\n", "  "+strings.Join(wantPrefixes, "\n  ")+"\n", 1)
	if got != want {
		t.Errorf("ruleset:\n%s\nwant:\n%s", got, want)
	}
}

func TestRenderPeerSetsExistWhileEmpty(t *testing.T) {
	in := testCluster()
	in.Policies = []*networkingv1.NetworkPolicy{
		withIngress(mkPolicy("default", "nobody", sel("app", "b"), ingressT),
			networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{podPeer(sel("app", "none"))}}),
	}
	rs := Render(Compute(in))
	set, ok := rs.Sets["peers-default/nobody-ingress-0"]
	if !ok || len(set.Elements) != 0 {
		t.Fatalf("want an empty peer set, got %+v", rs.Sets)
	}
	if !slices.Contains(rs.Chains["ingress-default/b"], "ip saddr @peers-default/nobody-ingress-0 return") {
		t.Errorf("chain = %q", rs.Chains["ingress-default/b"])
	}
}

func TestObjectNames(t *testing.T) {
	long := strings.Repeat("n", 63)
	longPod := strings.Repeat("p", 253)
	tests := []struct {
		name string
		got  string
		want string // "" checks shape only
	}{
		{"short chain", chainName(Ingress, "default", "web-0"), "ingress-default/web-0"},
		{"short set", setName("peers", RuleKey{"kube-system", "allow.dns", Egress, 3}), "peers-kube-system/allow.dns-egress-3"},
		{"long chain", chainName(Egress, long, longPod), ""},
		{"odd characters", chainName(Ingress, "default", "Web Pod"), ""},
		{"digit first", objName("x", "0"), "x-0"},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		if tt.want != "" && tt.got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, tt.got, tt.want)
		}
		if len(tt.got) > maxName || !validName(tt.got) {
			t.Errorf("%s: %q is not a valid short nft name", tt.name, tt.got)
		}
		if seen[tt.got] {
			t.Errorf("%s: %q is not unique", tt.name, tt.got)
		}
		seen[tt.got] = true
	}
	a := chainName(Egress, long, longPod+"a")
	b := chainName(Egress, long, longPod+"b")
	if a == b || !strings.HasPrefix(a, "egress-") || len(a) > maxName {
		t.Errorf("long names: %q and %q", a, b)
	}
	if validName("1abc") || validName("a b") || validName("") || !validName("kubelab-netpol") {
		t.Error("validName is wrong")
	}
}

func TestRenderEmptyFromMakesNoSet(t *testing.T) {
	in := testCluster()
	in.Policies = []*networkingv1.NetworkPolicy{
		withIngress(mkPolicy("default", "open", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "b"}}, ingressT),
			networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{numPort(tcp, 80)}}),
	}
	rs := Render(Compute(in))
	if len(rs.Sets) != 0 {
		t.Errorf("sets = %v, want none", rs.Sets)
	}
	want := []string{"ip saddr 10.244.1.11 return", "meta l4proto tcp th dport 80 return", "drop"}
	if !slices.Equal(rs.Chains["ingress-default/b"], want) {
		t.Errorf("chain = %q, want %q", rs.Chains["ingress-default/b"], want)
	}
}
