package plugin

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"
)

func TestHostPortRules(t *testing.T) {
	ctx := context.Background()
	nft := knftables.NewFake(knftables.IPv4Family, HostPortTable)
	ports := []PortMapping{{8080, 80, "tcp", ""}, {5353, 53, "udp", "172.31.0.9"}}
	chain := hostPortChain("c1", "eth0")
	tx := nft.NewTransaction()
	hostPortsTx(tx, chain, "c1", netip.MustParseAddr("10.244.1.5"), ports)
	if err := nft.Run(ctx, tx); err != nil {
		t.Fatal(err)
	}
	dump := nft.Dump()
	for _, want := range []string{
		"add chain ip kubelab-hostports prerouting { type nat hook prerouting priority -100 ; }",
		"add chain ip kubelab-hostports output { type nat hook output priority -100 ; }",
		"add chain ip kubelab-hostports postrouting { type nat hook postrouting priority 100 ; }",
		"add rule ip kubelab-hostports prerouting fib daddr type local ip daddr . meta l4proto . th dport vmap @hostip-ports",
		"add rule ip kubelab-hostports prerouting fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @hostports",
		"add rule ip kubelab-hostports output fib daddr type local ip daddr . meta l4proto . th dport vmap @hostip-ports",
		"add rule ip kubelab-hostports postrouting meta mark & 0x2000 != 0 masquerade",
		"add rule ip kubelab-hostports " + chain + " tcp dport 8080 ip saddr 10.244.1.5 meta mark set meta mark | 0x2000",
		"add rule ip kubelab-hostports " + chain + " tcp dport 8080 dnat to 10.244.1.5:80",
		"add rule ip kubelab-hostports " + chain + " ip daddr 172.31.0.9 udp dport 5353 dnat to 10.244.1.5:53",
		"add element ip kubelab-hostports hostports { tcp . 8080 : goto " + chain + " }",
		"add element ip kubelab-hostports hostip-ports { 172.31.0.9 . udp . 5353 : goto " + chain + " }",
	} {
		if !strings.Contains(dump, want+"\n") {
			t.Errorf("rules lack %q:\n%s", want, dump)
		}
	}

	// A second pod on another port; then a third wanting a port the first holds.
	other := hostPortChain("c2", "eth0")
	tx = nft.NewTransaction()
	hostPortsTx(tx, other, "c2", netip.MustParseAddr("10.244.1.6"), []PortMapping{{9090, 90, "tcp", ""}})
	if err := nft.Run(ctx, tx); err != nil {
		t.Fatal(err)
	}
	tx = nft.NewTransaction()
	hostPortsTx(tx, hostPortChain("c3", "eth0"), "c3", netip.MustParseAddr("10.244.1.7"), []PortMapping{{8080, 80, "tcp", ""}})
	if err := nft.Run(ctx, tx); !knftables.IsAlreadyExists(err) {
		t.Fatalf("a hostPort held by another pod: %v, want already exists", err)
	}
	held, err := heldHostPorts(ctx, nft, hostPortChain("c3", "eth0"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ports []PortMapping
		taken string
	}{
		{[]PortMapping{{8080, 80, "tcp", ""}}, "8080/tcp"},
		{[]PortMapping{{8080, 80, "tcp", "127.0.0.1"}}, "127.0.0.1:8080/tcp"}, // held on every address
		{[]PortMapping{{8080, 80, "udp", ""}}, ""},
		{[]PortMapping{{5353, 53, "udp", "172.31.0.9"}}, "172.31.0.9:5353/udp"},
		{[]PortMapping{{5353, 53, "udp", "127.0.0.1"}}, ""}, // held on another address
		{[]PortMapping{{5353, 53, "udp", ""}}, "5353/udp"},  // every address includes it
		{[]PortMapping{{5353, 53, "tcp", "172.31.0.9"}}, ""},
	} {
		if taken := takenHostPorts(tc.ports, held); taken != tc.taken {
			t.Errorf("%v: taken %q, want %q", tc.ports, taken, tc.taken)
		}
	}
	// The same port on two addresses, by two pods: both hold it.
	tx = nft.NewTransaction()
	hostPortsTx(tx, hostPortChain("c4", "eth0"), "c4", netip.MustParseAddr("10.244.1.8"), []PortMapping{{5353, 53, "udp", "127.0.0.1"}})
	if err := nft.Run(ctx, tx); err != nil {
		t.Fatalf("the same port on another address: %v", err)
	}
	if err := removeHostPortRules(ctx, nft, hostPortChain("c4", "eth0")); err != nil {
		t.Fatal(err)
	}

	// Removing the first pod's rules leaves the second's intact.
	if err := removeHostPortRules(ctx, nft, chain); err != nil {
		t.Fatal(err)
	}
	dump = nft.Dump()
	if strings.Contains(dump, chain) || strings.Contains(dump, "8080") || strings.Contains(dump, "5353") {
		t.Fatalf("first pod's rules left:\n%s", dump)
	}
	if !strings.Contains(dump, "tcp . 9090 : goto "+other) || !strings.Contains(dump, "dnat to 10.244.1.6:90") {
		t.Fatalf("second pod's rules gone:\n%s", dump)
	}
	// Removing again, or from a node without the table, is nothing to do.
	if err := removeHostPortRules(ctx, nft, chain); err != nil {
		t.Fatal(err)
	}
	if err := removeHostPortRules(ctx, knftables.NewFake(knftables.IPv4Family, HostPortTable), chain); err != nil {
		t.Fatal(err)
	}
}
