package netpol

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	tcp  = corev1.ProtocolTCP
	udp  = corev1.ProtocolUDP
	sctp = corev1.ProtocolSCTP

	ingressT = networkingv1.PolicyTypeIngress
	egressT  = networkingv1.PolicyTypeEgress
)

// Addresses of the test cluster. Node n1 is the one under test.
const (
	ipA    = "10.244.1.10" // default/a on n1: app=a, http 8080/TCP, dns 53/UDP
	ipB    = "10.244.1.11" // default/b on n1: app=b, http 9090/TCP
	ipC    = "10.244.1.12" // default/c on n1: app=c
	ipX    = "10.244.2.10" // other/x on n2: app=a, http 7070/TCP
	ipY    = "10.244.2.11" // other/y on n2: app=y
	ipZ    = "10.244.2.12" // third/z on n2: app=z
	ipHost = "172.31.0.5"  // default/host on n1: app=b, hostNetwork
	ipDead = "10.244.1.50" // default/dead on n1: app=a, Failed
	ipExt  = "192.168.5.5" // not a pod
)

func testCluster() Inputs {
	host := mkPod("default", "host", "n1", ipHost, lbl("app", "b"))
	host.Spec.HostNetwork = true
	dead := mkPod("default", "dead", "n1", ipDead, lbl("app", "a"))
	dead.Status.Phase = corev1.PodFailed
	return Inputs{
		NodeName: "n1",
		Namespaces: []*corev1.Namespace{
			mkNS("default", lbl("team", "a")), mkNS("other", lbl("team", "b")), mkNS("third", nil),
		},
		Pods: []*corev1.Pod{
			mkPod("default", "a", "n1", ipA, lbl("app", "a"), cport("http", tcp, 8080), cport("dns", udp, 53)),
			mkPod("default", "b", "n1", ipB, lbl("app", "b"), cport("http", "", 9090)),
			mkPod("default", "c", "n1", ipC, lbl("app", "c")),
			mkPod("other", "x", "n2", ipX, lbl("app", "a"), cport("http", tcp, 7070)),
			mkPod("other", "y", "n2", ipY, lbl("app", "y")),
			mkPod("third", "z", "n2", ipZ, lbl("app", "z")),
			host, dead,
		},
	}
}

type flow struct {
	src, dst string
	proto    corev1.Protocol
	port     int32
	want     bool
}

func TestComputeSemantics(t *testing.T) {
	ingressTo := func(name string, podSel *metav1.LabelSelector, rules ...networkingv1.NetworkPolicyIngressRule) *networkingv1.NetworkPolicy {
		return withIngress(mkPolicy("default", name, podSel, ingressT), rules...)
	}
	egressFrom := func(name string, podSel *metav1.LabelSelector, rules ...networkingv1.NetworkPolicyEgressRule) *networkingv1.NetworkPolicy {
		return withEgress(mkPolicy("default", name, podSel, egressT), rules...)
	}
	from := func(peers ...networkingv1.NetworkPolicyPeer) networkingv1.NetworkPolicyIngressRule {
		return networkingv1.NetworkPolicyIngressRule{From: peers}
	}
	to := func(peers ...networkingv1.NetworkPolicyPeer) networkingv1.NetworkPolicyEgressRule {
		return networkingv1.NetworkPolicyEgressRule{To: peers}
	}
	ports := func(r networkingv1.NetworkPolicyIngressRule, p ...networkingv1.NetworkPolicyPort) networkingv1.NetworkPolicyIngressRule {
		r.Ports = p
		return r
	}
	eports := func(r networkingv1.NetworkPolicyEgressRule, p ...networkingv1.NetworkPolicyPort) networkingv1.NetworkPolicyEgressRule {
		r.Ports = p
		return r
	}

	tests := []struct {
		name     string
		policies []*networkingv1.NetworkPolicy
		isolated int // pods of n1 isolated in some direction
		flows    []flow
	}{
		{
			name: "no policy allows everything",
			flows: []flow{
				{ipA, ipB, tcp, 9090, true}, {ipX, ipB, udp, 1, true}, {ipExt, ipC, tcp, 80, true}, {ipB, ipExt, tcp, 443, true},
			},
		},
		{
			name:     "ingress deny-all isolates only the selected pod",
			policies: []*networkingv1.NetworkPolicy{mkPolicy("default", "deny", sel("app", "b"), ingressT)},
			isolated: 1,
			flows: []flow{
				{ipA, ipB, tcp, 9090, false}, {ipX, ipB, tcp, 9090, false}, {ipExt, ipB, udp, 53, false},
				{ipB, ipA, tcp, 8080, true}, {ipC, ipA, tcp, 8080, true}, {ipB, ipExt, tcp, 80, true},
			},
		},
		{
			name:     "podSelector peer is the policy's namespace only",
			policies: []*networkingv1.NetworkPolicy{ingressTo("allow-a", sel("app", "b"), from(podPeer(sel("app", "a"))))},
			isolated: 1,
			flows: []flow{
				{ipA, ipB, tcp, 9090, true}, {ipA, ipB, udp, 7, true}, {ipC, ipB, tcp, 9090, false},
				{ipX, ipB, tcp, 9090, false}, {ipDead, ipB, tcp, 9090, false},
			},
		},
		{
			name:     "namespaceSelector peer",
			policies: []*networkingv1.NetworkPolicy{ingressTo("ns-b", sel("app", "b"), from(nsPeer(sel("team", "b"))))},
			isolated: 1,
			flows:    []flow{{ipX, ipB, tcp, 1, true}, {ipY, ipB, tcp, 1, true}, {ipA, ipB, tcp, 1, false}, {ipZ, ipB, tcp, 1, false}},
		},
		{
			name: "namespaceSelector and podSelector together",
			policies: []*networkingv1.NetworkPolicy{ingressTo("both", sel("app", "b"),
				from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("team", "b"), PodSelector: sel("app", "a")}))},
			isolated: 1,
			flows:    []flow{{ipX, ipB, tcp, 1, true}, {ipY, ipB, tcp, 1, false}, {ipA, ipB, tcp, 1, false}},
		},
		{
			name:     "empty namespaceSelector is every pod, not every address",
			policies: []*networkingv1.NetworkPolicy{ingressTo("all-pods", sel("app", "b"), from(nsPeer(&metav1.LabelSelector{})))},
			isolated: 1,
			flows: []flow{
				{ipA, ipB, tcp, 1, true}, {ipX, ipB, tcp, 1, true}, {ipZ, ipB, tcp, 1, true},
				{ipExt, ipB, tcp, 1, false}, {ipHost, ipB, tcp, 1, false},
			},
		},
		{
			name: "namespaces carry kubernetes.io/metadata.name",
			policies: []*networkingv1.NetworkPolicy{ingressTo("by-name", sel("app", "b"),
				from(nsPeer(sel(corev1.LabelMetadataName, "third"))))},
			isolated: 1,
			flows:    []flow{{ipZ, ipB, tcp, 1, true}, {ipX, ipB, tcp, 1, false}},
		},
		{
			name:     "ipBlock with except",
			policies: []*networkingv1.NetworkPolicy{ingressTo("block", sel("app", "b"), from(blockPeer("10.244.2.0/24", ipY+"/32")))},
			isolated: 1,
			flows: []flow{
				{ipX, ipB, tcp, 1, true}, {ipZ, ipB, tcp, 1, true}, {"10.244.2.200", ipB, tcp, 1, true},
				{ipY, ipB, tcp, 1, false}, {ipA, ipB, tcp, 1, false}, {ipExt, ipB, tcp, 1, false},
			},
		},
		{
			name:     "ipv6 ipBlock allows nothing over IPv4",
			policies: []*networkingv1.NetworkPolicy{ingressTo("v6", sel("app", "b"), from(blockPeer("::/0")))},
			isolated: 1,
			flows:    []flow{{ipA, ipB, tcp, 1, false}},
		},
		{
			name: "numeric port and protocol",
			policies: []*networkingv1.NetworkPolicy{ingressTo("port", sel("app", "b"),
				ports(from(podPeer(sel("app", "a"))), numPort(tcp, 9090), numPort(sctp, 9)))},
			isolated: 1,
			flows: []flow{
				{ipA, ipB, tcp, 9090, true}, {ipA, ipB, sctp, 9, true}, {ipA, ipB, tcp, 9091, false},
				{ipA, ipB, udp, 9090, false}, {ipC, ipB, tcp, 9090, false},
			},
		},
		{
			name: "endPort range",
			policies: []*networkingv1.NetworkPolicy{ingressTo("range", sel("app", "b"),
				ports(from(), rangePort(tcp, 9000, 9100)))},
			isolated: 1,
			flows: []flow{
				{ipA, ipB, tcp, 9000, true}, {ipX, ipB, tcp, 9050, true}, {ipExt, ipB, tcp, 9100, true},
				{ipA, ipB, tcp, 8999, false}, {ipA, ipB, tcp, 9101, false},
			},
		},
		{
			name:     "protocol without port is every port of it",
			policies: []*networkingv1.NetworkPolicy{ingressTo("udp", sel("app", "b"), ports(from(), protoOnly(udp)))},
			isolated: 1,
			flows:    []flow{{ipA, ipB, udp, 53, true}, {ipExt, ipB, udp, 9999, true}, {ipA, ipB, tcp, 53, false}},
		},
		{
			name: "ingress named port resolves against each selected pod",
			policies: []*networkingv1.NetworkPolicy{ingressTo("named", &metav1.LabelSelector{},
				ports(from(), namedPolicyPort(tcp, "http")))},
			isolated: 3,
			flows: []flow{
				{ipC, ipA, tcp, 8080, true}, {ipC, ipA, tcp, 9090, false}, {ipC, ipB, tcp, 9090, true},
				{ipC, ipB, tcp, 8080, false}, {ipA, ipC, tcp, 8080, false}, // c has no port http
			},
		},
		{
			name: "named port protocol must match",
			policies: []*networkingv1.NetworkPolicy{ingressTo("named-udp", sel("app", "a"),
				ports(from(), namedPolicyPort(udp, "http"), namedPolicyPort(udp, "dns")))},
			isolated: 1,
			flows:    []flow{{ipB, ipA, udp, 53, true}, {ipB, ipA, udp, 8080, false}, {ipB, ipA, tcp, 8080, false}},
		},
		{
			name:     "empty ingress rule allows all",
			policies: []*networkingv1.NetworkPolicy{ingressTo("all", sel("app", "b"), networkingv1.NetworkPolicyIngressRule{})},
			isolated: 1,
			flows:    []flow{{ipExt, ipB, tcp, 1, true}, {ipA, ipB, udp, 2, true}},
		},
		{
			name:     "egress deny-all",
			policies: []*networkingv1.NetworkPolicy{mkPolicy("default", "deny-out", sel("app", "a"), egressT)},
			isolated: 1,
			flows: []flow{
				{ipA, ipB, tcp, 9090, false}, {ipA, ipX, tcp, 7070, false}, {ipA, ipExt, udp, 53, false},
				{ipB, ipA, tcp, 8080, true}, {ipX, ipA, tcp, 8080, true}, {ipB, ipC, tcp, 1, true},
			},
		},
		{
			name: "egress to pods on a port",
			policies: []*networkingv1.NetworkPolicy{egressFrom("out", sel("app", "a"),
				eports(to(podPeer(sel("app", "b"))), numPort(tcp, 9090)))},
			isolated: 1,
			flows:    []flow{{ipA, ipB, tcp, 9090, true}, {ipA, ipB, tcp, 80, false}, {ipA, ipC, tcp, 9090, false}},
		},
		{
			name: "egress named port resolves against the destination pod",
			policies: []*networkingv1.NetworkPolicy{egressFrom("out-named", sel("app", "a"),
				eports(to(nsPeer(&metav1.LabelSelector{})), namedPolicyPort(tcp, "http")))},
			isolated: 1,
			flows: []flow{
				{ipA, ipB, tcp, 9090, true}, {ipA, ipB, tcp, 8080, false}, {ipA, ipX, tcp, 7070, true},
				{ipA, ipY, tcp, 7070, false}, {ipA, ipExt, tcp, 9090, false},
			},
		},
		{
			name: "egress named port to an ipBlock allows the pods in it",
			policies: []*networkingv1.NetworkPolicy{egressFrom("out-block", sel("app", "a"),
				eports(to(blockPeer("10.244.2.0/24")), namedPolicyPort(tcp, "http")))},
			isolated: 1,
			flows:    []flow{{ipA, ipX, tcp, 7070, true}, {ipA, ipB, tcp, 9090, false}, {ipA, ipExt, tcp, 7070, false}},
		},
		{
			name: "egress to any peer on a named and a numeric port",
			policies: []*networkingv1.NetworkPolicy{egressFrom("out-any", sel("app", "a"),
				eports(to(), namedPolicyPort(tcp, "http"), numPort(udp, 53)))},
			isolated: 1,
			flows: []flow{
				{ipA, ipX, tcp, 7070, true}, {ipA, ipB, tcp, 9090, true}, {ipA, ipExt, udp, 53, true},
				{ipA, ipExt, tcp, 7070, false}, {ipA, ipB, tcp, 7070, false},
			},
		},
		{
			name: "union of the rules of all selecting policies",
			policies: []*networkingv1.NetworkPolicy{
				ingressTo("p1", sel("app", "b"), ports(from(podPeer(sel("app", "a"))), numPort(tcp, 9090))),
				ingressTo("p2", sel("app", "b"), ports(from(podPeer(sel("app", "c"))), numPort(tcp, 9091))),
				mkPolicy("default", "deny", sel("app", "b"), ingressT),
			},
			isolated: 1,
			flows: []flow{
				{ipA, ipB, tcp, 9090, true}, {ipA, ipB, tcp, 9091, false},
				{ipC, ipB, tcp, 9091, true}, {ipC, ipB, tcp, 9090, false}, {ipX, ipB, tcp, 9090, false},
			},
		},
		{
			name: "a pod is checked on both ends",
			policies: []*networkingv1.NetworkPolicy{
				egressFrom("a-out", sel("app", "a"), to(podPeer(sel("app", "b")))),
				ingressTo("b-in", sel("app", "b"), ports(from(podPeer(&metav1.LabelSelector{})), numPort(tcp, 9090))),
			},
			isolated: 2,
			flows: []flow{
				{ipA, ipB, tcp, 9090, true}, {ipA, ipB, tcp, 9091, false}, {ipA, ipC, tcp, 9090, false},
				{ipC, ipB, tcp, 9090, true},
			},
		},
		{
			name:     "an Egress-only policy leaves ingress open",
			policies: []*networkingv1.NetworkPolicy{mkPolicy("default", "out-only", sel("app", "b"), egressT)},
			isolated: 1,
			flows:    []flow{{ipA, ipB, tcp, 9090, true}, {ipB, ipA, tcp, 8080, false}},
		},
		{
			name: "policyTypes default to Ingress, plus Egress with egress rules",
			policies: []*networkingv1.NetworkPolicy{
				withEgress(mkPolicy("default", "defaulted", sel("app", "b")), to(podPeer(sel("app", "c")))),
			},
			isolated: 1,
			flows:    []flow{{ipA, ipB, tcp, 9090, false}, {ipB, ipC, tcp, 1, true}, {ipB, ipA, tcp, 1, false}},
		},
		{
			name:     "policies select pods of their own namespace only",
			policies: []*networkingv1.NetworkPolicy{mkPolicy("other", "deny", &metav1.LabelSelector{}, ingressT)},
			isolated: 0,
			flows:    []flow{{ipA, ipB, tcp, 9090, true}, {ipB, ipX, tcp, 7070, true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := testCluster()
			in.Policies = tt.policies
			d := Compute(in)
			if len(d.Problems) > 0 {
				t.Fatalf("problems: %v", d.Problems)
			}
			if len(d.Pods) != tt.isolated {
				t.Errorf("isolated pods = %d, want %d: %+v", len(d.Pods), tt.isolated, d.Pods)
			}
			for _, pp := range d.Pods {
				if pp.Name == "host" || pp.Name == "dead" || pp.Namespace != "default" {
					t.Errorf("pod %s/%s is protected on n1", pp.Namespace, pp.Name)
				}
			}
			for _, f := range tt.flows {
				if got := allowed(d, f.src, f.dst, f.proto, f.port); got != f.want {
					t.Errorf("%s -> %s %s/%d allowed = %v, want %v", f.src, f.dst, f.proto, f.port, got, f.want)
				}
			}
		})
	}
}

func TestComputePeersAndProblems(t *testing.T) {
	in := testCluster()
	bad := withIngress(mkPolicy("default", "bad", sel("app", "b"), ingressT),
		networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{
			blockPeer("10.0.0.0/33"),
			{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}, PodSelector: sel("app", "a")},
			{},
			podPeer(sel("app", "c")),
		}, Ports: []networkingv1.NetworkPolicyPort{numPort("ICMP", 1), numPort(tcp, 70000), numPort(tcp, 80)}},
	)
	badSel := mkPolicy("default", "bad-selector", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "app", Operator: "Near", Values: []string{"b"}}}}, ingressT)
	in.Policies = []*networkingv1.NetworkPolicy{bad, badSel}
	d := Compute(in)
	var msgs []string
	for _, p := range d.Problems {
		msgs = append(msgs, p.Error())
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{
		`networkpolicy default/bad: spec.ingress[0].from[0].ipBlock.cidr: Invalid value: "10.0.0.0/33"`,
		`networkpolicy default/bad: spec.ingress[0].from[1]: Forbidden: may not specify both ipBlock and another peer`,
		`networkpolicy default/bad: spec.ingress[0].from[2]: Required value: must specify a peer`,
		`networkpolicy default/bad: spec.ingress[0].ports[0].protocol: Unsupported value: "ICMP"`,
		`networkpolicy default/bad: spec.ingress[0].ports[1].port: Invalid value: 70000`,
		`networkpolicy default/bad-selector: spec.podSelector: Invalid value:`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
	if len(d.Problems) != 6 {
		t.Errorf("got %d problems, want 6:\n%s", len(d.Problems), all)
	}
	// What stays valid still applies: c on port 80 only.
	for _, f := range []flow{{ipC, ipB, tcp, 80, true}, {ipC, ipB, tcp, 81, false}, {ipA, ipB, tcp, 80, false}, {"10.1.2.3", ipB, tcp, 80, false}} {
		if got := allowed(d, f.src, f.dst, f.proto, f.port); got != f.want {
			t.Errorf("%s -> %s %s/%d allowed = %v, want %v", f.src, f.dst, f.proto, f.port, got, f.want)
		}
	}
}

func TestComputeDuplicateAddress(t *testing.T) {
	in := testCluster()
	in.Pods = append(in.Pods, mkPod("default", "b2", "n1", ipB, lbl("app", "b")))
	in.Policies = []*networkingv1.NetworkPolicy{mkPolicy("default", "deny", sel("app", "b"), ingressT)}
	d := Compute(in)
	if len(d.Pods) != 1 || d.Pods[0].Name != "b" {
		t.Fatalf("pods = %+v, want default/b only", d.Pods)
	}
	if len(d.Problems) != 1 || !strings.Contains(d.Problems[0].Error(), "pod default/b2: address 10.244.1.11 is also pod default/b's") {
		t.Errorf("problems = %v", d.Problems)
	}
}

func TestComputeIsDeterministic(t *testing.T) {
	in := testCluster()
	in.Policies = []*networkingv1.NetworkPolicy{
		withIngress(mkPolicy("default", "p", &metav1.LabelSelector{}, ingressT),
			networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{nsPeer(&metav1.LabelSelector{})}}),
	}
	first := Render(Compute(in))
	// Reverse the input order: the result must not change.
	for i, j := 0, len(in.Pods)-1; i < j; i, j = i+1, j-1 {
		in.Pods[i], in.Pods[j] = in.Pods[j], in.Pods[i]
	}
	second := Render(Compute(in))
	if a, b := dumpRuleset(first), dumpRuleset(second); a != b {
		t.Errorf("input order changed the result:\n%s\nvs\n%s", a, b)
	}
}
