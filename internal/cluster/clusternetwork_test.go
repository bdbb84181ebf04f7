package cluster

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/kubelab/kubelab/internal/vpc"
)

// The API server's connections into the cluster start in the first node whose
// namespace exists: a removed node's namespace is passed over.
func TestFirstExisting(t *testing.T) {
	present := map[string]bool{"/run/netns/b": true, "/run/netns/c": true}
	exists := func(p string) bool { return present[p] }
	for _, tc := range []struct {
		paths  []string
		want   string
		wantOK bool
	}{
		{[]string{"/run/netns/a", "/run/netns/b", "/run/netns/c"}, "/run/netns/b", true},
		{[]string{"/run/netns/c", "/run/netns/b"}, "/run/netns/c", true},
		{[]string{"/run/netns/a"}, "", false},
		{nil, "", false},
	} {
		if got, ok := firstExisting(tc.paths, exists); got != tc.want || ok != tc.wantOK {
			t.Errorf("firstExisting(%v) = %q, %v; want %q, %v", tc.paths, got, ok, tc.want, tc.wantOK)
		}
	}
}

// Before the nodes are named, or once none of their namespaces exists, a dial fails at
// once with a reason instead of leaving from the machine's namespace.
func TestClusterNetworkWithoutNodes(t *testing.T) {
	v, err := vpc.New(vpc.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	n := newClusterNetwork(v)
	n.exists = func(string) bool { return false }
	if _, err := n.DialContext(context.Background(), "tcp", "10.96.0.1:443"); err == nil || !strings.Contains(err.Error(), "no node's network namespace") {
		t.Errorf("dial before the nodes are known: %v", err)
	}
	n.setNodes([]Node{{Name: "ip-172-31-0-10.ec2.internal"}})
	if _, err := n.DialContext(context.Background(), "tcp", "10.96.0.1:443"); err == nil || !strings.Contains(err.Error(), "ip-172-31-0-10.ec2.internal") {
		t.Errorf("dial with no node namespace: %v", err)
	}
}

// The cluster's own ranges, which the NAT gateway never carries: the VPC's, the pods',
// and the Services' (the API server's default, or the configured one).
func TestClusterRanges(t *testing.T) {
	for services, want := range map[string]string{
		"":              "172.31.0.0/16 10.244.0.0/16 10.96.0.0/12",
		"10.100.0.0/16": "172.31.0.0/16 10.244.0.0/16 10.100.0.0/16",
	} {
		c := &Cluster{cfg: Config{ControlPlaneConfig: ControlPlaneConfig{ServiceCIDR: services}}}
		got, err := c.clusterRanges()
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, p := range got {
			s = append(s, p.String())
		}
		if strings.Join(s, " ") != want {
			t.Errorf("service CIDR %q: ranges %v, want %s", services, s, want)
		}
	}
	c := &Cluster{cfg: Config{ControlPlaneConfig: ControlPlaneConfig{ServiceCIDR: "nope"}}}
	if _, err := c.clusterRanges(); err == nil {
		t.Error("a bad service CIDR gave ranges")
	}
}

// The configured upstreams win over the machine's resolv.conf.
func TestUpstreamDNS(t *testing.T) {
	want := []netip.AddrPort{netip.MustParseAddrPort("192.0.2.53:5353")}
	c := &Cluster{cfg: Config{UpstreamDNS: want}}
	if got := c.upstreamDNS(slog.New(slog.DiscardHandler)); !slices.Equal(got, want) {
		t.Errorf("upstreamDNS = %v, want %v", got, want)
	}
}
