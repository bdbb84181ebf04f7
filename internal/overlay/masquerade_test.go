package overlay

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"
)

func TestMasqueradeRules(t *testing.T) {
	nft := knftables.NewFake(knftables.IPv4Family, TableName)
	cluster := netip.MustParsePrefix("10.244.0.0/16")
	for range 2 { // applying twice leaves one rule
		tx := nft.NewTransaction()
		masqueradeRules(tx, cluster, "eth0")
		if err := nft.Run(context.Background(), tx); err != nil {
			t.Fatal(err)
		}
	}
	want := strings.TrimSpace(`
add table ip kubelab-overlay
add chain ip kubelab-overlay postrouting { type nat hook postrouting priority 100 ; }
add rule ip kubelab-overlay postrouting ip saddr 10.244.0.0/16 ip daddr != 10.244.0.0/16 oifname "eth0" masquerade comment "pod traffic leaving the cluster network"
`)
	if got := strings.TrimSpace(nft.Dump()); got != want {
		t.Errorf("table\n got:\n%s\nwant:\n%s", got, want)
	}

	tx := nft.NewTransaction()
	deleteTable(tx)
	if err := nft.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(nft.Dump()); got != "" {
		t.Errorf("after delete:\n%s", got)
	}
	tx = nft.NewTransaction()
	deleteTable(tx)
	if err := nft.Run(context.Background(), tx); err != nil {
		t.Errorf("deleting a missing table: %v", err)
	}
}
