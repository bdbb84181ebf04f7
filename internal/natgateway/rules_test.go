package natgateway

import (
	"context"
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"
)

var clusterRanges = []netip.Prefix{
	netip.MustParsePrefix("172.31.0.0/16"), netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.96.0.0/12"),
}

func TestExcludedRanges(t *testing.T) {
	got := excludedRanges(append(slices.Clone(clusterRanges),
		netip.MustParsePrefix("10.244.3.0/24"),  // inside the pods'
		netip.MustParsePrefix("127.0.0.1/32"),   // inside loopback
		netip.MustParsePrefix("192.168.7.9/16"), // not masked
	))
	var s []string
	for _, p := range got {
		s = append(s, p.String())
	}
	want := []string{"0.0.0.0/8", "10.96.0.0/12", "10.244.0.0/16", "127.0.0.0/8", "169.254.0.0/16", "172.31.0.0/16",
		"192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4"}
	if !slices.Equal(s, want) {
		t.Errorf("excludedRanges = %v, want %v", s, want)
	}
}

// The gateway carries connections to addresses outside the cluster and the special
// ranges, and nothing else.
func TestCarries(t *testing.T) {
	excluded := excludedRanges(clusterRanges)
	for addr, want := range map[string]bool{
		"198.51.100.7":    true,
		"8.8.8.8":         true,
		"10.0.0.1":        true, // a private address outside the cluster's (the machine's LAN)
		"192.168.1.10":    true,
		"::ffff:1.2.3.4":  true, // a mapped IPv4 address is that address
		"172.31.0.1":      false,
		"172.31.0.2":      false,
		"172.31.255.254":  false,
		"10.244.1.5":      false,
		"10.96.0.10":      false,
		"10.111.255.255":  false,
		"127.0.0.1":       false,
		"169.254.169.254": false,
		"0.0.0.0":         false,
		"224.0.0.251":     false,
		"255.255.255.255": false,
		"2001:db8::1":     false, // the VPC is IPv4 only
	} {
		if got := carries(netip.MustParseAddr(addr), excluded); got != want {
			t.Errorf("carries(%s) = %v, want %v", addr, got, want)
		}
	}
}

func TestGatewayRules(t *testing.T) {
	nft := knftables.NewFake(knftables.IPv4Family, TableName)
	excluded := excludedRanges(clusterRanges)
	for _, port := range []uint16{40000, 40001} { // a second start replaces the rule
		tx := nft.NewTransaction()
		gatewayRules(tx, netip.AddrPortFrom(netip.MustParseAddr("172.31.0.1"), port), excluded)
		if err := nft.Run(context.Background(), tx); err != nil {
			t.Fatal(err)
		}
	}
	want := strings.TrimSpace(`
add table ip kubelab-nat-gateway
add chain ip kubelab-nat-gateway prerouting { type nat hook prerouting priority -100 ; }
add rule ip kubelab-nat-gateway prerouting ip daddr != { 0.0.0.0/8, 10.96.0.0/12, 10.244.0.0/16, 127.0.0.0/8, 169.254.0.0/16, 172.31.0.0/16, 224.0.0.0/4, 240.0.0.0/4 } meta l4proto tcp dnat to 172.31.0.1:40001 comment "TCP leaving the cluster, to the NAT gateway"
`)
	if got := strings.TrimSpace(nft.Dump()); got != want {
		t.Errorf("table\n got:\n%s\nwant:\n%s", got, want)
	}
	for range 2 { // deleting a missing table is no error
		tx := nft.NewTransaction()
		deleteTable(tx)
		if err := nft.Run(context.Background(), tx); err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(nft.Dump()); got != "" {
			t.Errorf("after delete:\n%s", got)
		}
	}
}

func TestSockaddrIn(t *testing.T) {
	// AF_INET in host order, port 80, 198.51.100.7, zero padding.
	b := []byte{0, 0, 0, 80, 198, 51, 100, 7, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.NativeEndian.PutUint16(b, unix.AF_INET)
	if got, err := sockaddrIn(b); err != nil || got != netip.MustParseAddrPort("198.51.100.7:80") {
		t.Errorf("sockaddrIn = %v, %v", got, err)
	}
	if _, err := sockaddrIn(make([]byte, 16)); err == nil {
		t.Error("a zero family decoded")
	}
}

func TestNewErrors(t *testing.T) {
	for _, cfg := range []Config{
		{NetNS: "relative", ClusterRanges: clusterRanges},
		{NetNS: "/run/netns/x"},
		{NetNS: "/run/netns/x", ClusterRanges: []netip.Prefix{netip.MustParsePrefix("fd00::/8")}},
	} {
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "nat gateway config") {
			t.Errorf("New(%+v) = %v", cfg, err)
		}
	}
}
