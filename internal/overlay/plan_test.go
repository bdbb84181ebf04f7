package overlay

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testPlanner(mode string) planner {
	return planner{mode: mode, device: "kubelab.1", underlay: "eth0", cluster: netip.MustParsePrefix("10.244.0.0/16"),
		self: "node-a", own: netip.MustParsePrefix("10.244.1.0/24")}
}

func node(name, podCIDR string, ann map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}, Spec: corev1.NodeSpec{PodCIDR: podCIDR}}
}

func ann(mac, ip string) map[string]string {
	m := map[string]string{}
	if mac != "" {
		m[AnnotationVTEPMAC] = mac
	}
	if ip != "" {
		m[AnnotationNodeIP] = ip
	}
	return m
}

func TestPlanForNode(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mode       string
		node       *corev1.Node
		want       string // entries.String()
		err        string
		incomplete bool
	}{
		{name: "vxlan", mode: ModeVXLAN, node: node("node-b", "10.244.2.0/24", ann("02:00:00:00:00:0B", "172.31.2.10")),
			want: "neigh 10.244.2.0 lladdr 02:00:00:00:00:0b; fdb 02:00:00:00:00:0b dst 172.31.2.10; route 10.244.2.0/24 via 10.244.2.0 dev kubelab.1"},
		{name: "direct", mode: ModeDirect, node: node("node-b", "10.244.2.0/24", ann("", "172.31.2.10")),
			want: "route 10.244.2.0/24 via 172.31.2.10 dev eth0"},
		{name: "podCIDR with host bits", mode: ModeDirect, node: node("node-b", "10.244.2.7/24", ann("", "172.31.2.10")),
			want: "route 10.244.2.0/24 via 172.31.2.10 dev eth0"},
		{name: "deleted", mode: ModeVXLAN, node: nil},
		{name: "self", mode: ModeVXLAN, node: node("node-a", "10.244.1.0/24", ann("02:00:00:00:00:0a", "172.31.1.10"))},
		{name: "no podCIDR", mode: ModeVXLAN, node: node("node-b", "", ann("02:00:00:00:00:0b", "172.31.2.10")),
			err: "no spec.podCIDR", incomplete: true},
		{name: "no node ip", mode: ModeDirect, node: node("node-b", "10.244.2.0/24", nil),
			err: "no kubelab.io/node-ip annotation", incomplete: true},
		{name: "no mac", mode: ModeVXLAN, node: node("node-b", "10.244.2.0/24", ann("", "172.31.2.10")),
			err: "no kubelab.io/vtep-mac annotation", incomplete: true},
		{name: "bad mac", mode: ModeVXLAN, node: node("node-b", "10.244.2.0/24", ann("zz", "172.31.2.10")),
			err: `annotation kubelab.io/vtep-mac="zz"`},
		{name: "multicast mac", mode: ModeVXLAN, node: node("node-b", "10.244.2.0/24", ann("01:00:5e:00:00:01", "172.31.2.10")),
			err: "not a unicast MAC address"},
		{name: "zero mac", mode: ModeVXLAN, node: node("node-b", "10.244.2.0/24", ann("00:00:00:00:00:00", "172.31.2.10")),
			err: "the zero MAC address"},
		{name: "long mac", mode: ModeVXLAN, node: node("node-b", "10.244.2.0/24", ann("02:00:00:00:00:00:00:01", "172.31.2.10")),
			err: "not a 48-bit MAC address"},
		{name: "bad ip", mode: ModeVXLAN, node: node("node-b", "10.244.2.0/24", ann("02:00:00:00:00:0b", "fd00::1")),
			err: `annotation kubelab.io/node-ip="fd00::1" is not a unicast IPv4 address`},
		{name: "loopback ip", mode: ModeDirect, node: node("node-b", "10.244.2.0/24", ann("", "127.0.0.1")),
			err: "is not a unicast IPv4 address"},
		{name: "outside cluster", mode: ModeVXLAN, node: node("node-b", "10.245.2.0/24", ann("02:00:00:00:00:0b", "172.31.2.10")),
			err: "podCIDR 10.245.2.0/24 is outside the cluster CIDR 10.244.0.0/16"},
		{name: "wider than cluster", mode: ModeVXLAN, node: node("node-b", "10.0.0.0/8", ann("02:00:00:00:00:0b", "172.31.2.10")),
			err: "is outside the cluster CIDR"},
		{name: "ipv6 podCIDR", mode: ModeVXLAN, node: node("node-b", "fd00:1::/64", ann("02:00:00:00:00:0b", "172.31.2.10")),
			err: "is not IPv4"},
		{name: "garbage podCIDR", mode: ModeVXLAN, node: node("node-b", "x", ann("02:00:00:00:00:0b", "172.31.2.10")),
			err: `podCIDR "x"`},
		{name: "own subnet", mode: ModeVXLAN, node: node("node-b", "10.244.1.0/24", ann("02:00:00:00:00:0b", "172.31.2.10")),
			err: "overlaps this node's 10.244.1.0/24"},
		{name: "covering own subnet", mode: ModeVXLAN, node: node("node-b", "10.244.0.0/20", ann("02:00:00:00:00:0b", "172.31.2.10")),
			err: "overlaps this node's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := testPlanner(tc.mode).forNode(tc.node)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				if errors.Is(err, errIncomplete) != tc.incomplete {
					t.Errorf("errors.Is(err, errIncomplete) = %v, want %v", !tc.incomplete, tc.incomplete)
				}
				if !got.empty() {
					t.Errorf("entries %s with an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tc.want {
				t.Errorf("entries\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestStaleAndMissing(t *testing.T) {
	p := testPlanner(ModeVXLAN)
	b, _ := p.forNode(node("node-b", "10.244.2.0/24", ann("02:00:00:00:00:0b", "172.31.2.10")))
	c, _ := p.forNode(node("node-c", "10.244.3.0/24", ann("02:00:00:00:00:0c", "172.31.3.10")))
	bMoved, _ := p.forNode(node("node-b", "10.244.2.0/24", ann("02:00:00:00:00:0b", "172.31.2.99")))
	bNewMAC, _ := p.forNode(node("node-b", "10.244.2.0/24", ann("02:00:00:00:00:bb", "172.31.2.10")))
	// node D took node B's subnet.
	d, _ := p.forNode(node("node-d", "10.244.2.0/24", ann("02:00:00:00:00:0d", "172.31.4.10")))

	for _, tc := range []struct {
		name         string
		have         entries
		want         []entries
		stale, unset string
	}{
		{name: "in sync", have: b.plus(c), want: []entries{b, c}},
		{name: "node gone", have: b.plus(c), want: []entries{c},
			stale: "neigh 10.244.2.0 lladdr 02:00:00:00:00:0b; fdb 02:00:00:00:00:0b dst 172.31.2.10; route 10.244.2.0/24 via 10.244.2.0 dev kubelab.1"},
		{name: "node new", have: c, want: []entries{b, c},
			unset: "neigh 10.244.2.0 lladdr 02:00:00:00:00:0b; fdb 02:00:00:00:00:0b dst 172.31.2.10; route 10.244.2.0/24 via 10.244.2.0 dev kubelab.1"},
		{name: "node ip changed: fdb replaced, nothing deleted", have: b, want: []entries{bMoved},
			unset: "fdb 02:00:00:00:00:0b dst 172.31.2.99"},
		{name: "mac changed: old fdb deleted, neighbour replaced", have: b, want: []entries{bNewMAC},
			stale: "fdb 02:00:00:00:00:0b dst 172.31.2.10",
			unset: "neigh 10.244.2.0 lladdr 02:00:00:00:00:bb; fdb 02:00:00:00:00:bb dst 172.31.2.10"},
		{name: "subnet taken by another node: only the fdb entry goes", have: b, want: []entries{{}, d},
			stale: "fdb 02:00:00:00:00:0b dst 172.31.2.10",
			unset: "neigh 10.244.2.0 lladdr 02:00:00:00:00:0d; fdb 02:00:00:00:00:0d dst 172.31.4.10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := stale(tc.have, tc.want...).String(); got != tc.stale {
				t.Errorf("stale\n got %s\nwant %s", got, tc.stale)
			}
			var all entries
			for _, w := range tc.want {
				all = all.plus(w)
			}
			if got := missing(tc.have, all).String(); got != tc.unset {
				t.Errorf("missing\n got %s\nwant %s", got, tc.unset)
			}
		})
	}
}
