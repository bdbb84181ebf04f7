package natgateway

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/kubelab/kubelab/internal/util/netns"
)

// TableName is the gateway's nftables table (family ip), in the VPC's namespace.
const TableName = "kubelab-nat-gateway"

// chainName is the table's one chain, at the dstnat hook.
const chainName = "prerouting"

// specialRanges are the IPv4 ranges no gateway carries anywhere: "this network",
// loopback, link-local (the instance metadata address among them), multicast and the
// reserved block with the limited broadcast address.
var specialRanges = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
}

// excludedRanges are cluster's ranges and the special ones, masked, sorted, with the
// ranges inside others left out.
func excludedRanges(cluster []netip.Prefix) []netip.Prefix {
	var all []netip.Prefix
	for _, p := range slices.Concat(cluster, specialRanges) {
		all = append(all, p.Masked())
	}
	slices.SortFunc(all, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	var out []netip.Prefix
	for _, p := range all {
		if n := len(out); n > 0 && out[n-1].Overlaps(p) {
			continue // sorted by address, then widest first: p is inside out[n-1]
		}
		out = append(out, p)
	}
	return out
}

// carries says whether the gateway carries a connection to dst: an IPv4 address outside
// every excluded range.
func carries(dst netip.Addr, excluded []netip.Prefix) bool {
	dst = dst.Unmap()
	if !dst.Is4() {
		return false
	}
	for _, p := range excluded {
		if p.Contains(dst) {
			return false
		}
	}
	return true
}

// gatewayRules adds to tx the whole table, replacing what it held: new TCP connections to
// any address outside excluded go to the listener at listen.
func gatewayRules(tx *knftables.Transaction, listen netip.AddrPort, excluded []netip.Prefix) {
	tx.Add(&knftables.Table{})
	tx.Add(&knftables.Chain{
		Name:     chainName,
		Type:     knftables.PtrTo(knftables.NATType),
		Hook:     knftables.PtrTo(knftables.PreroutingHook),
		Priority: knftables.PtrTo(knftables.DNATPriority),
	})
	tx.Flush(&knftables.Chain{Name: chainName})
	ranges := make([]string, len(excluded))
	for i, p := range excluded {
		ranges[i] = p.String()
	}
	tx.Add(&knftables.Rule{
		Chain: chainName,
		Rule: knftables.Concat(
			"ip daddr != {", strings.Join(ranges, ", "), "}",
			"meta l4proto tcp",
			"dnat to", listen.String(),
		),
		Comment: knftables.PtrTo("TCP leaving the cluster, to the NAT gateway"),
	})
}

// deleteTable adds to tx the deletion of the table, whether it exists or not.
func deleteTable(tx *knftables.Transaction) {
	tx.Add(&knftables.Table{})
	tx.Delete(&knftables.Table{})
}

// newNFTables opens the table in the namespace at path.
func newNFTables(path string) (knftables.Interface, error) {
	return netns.NFTables(path, knftables.IPv4Family, TableName, knftables.NoObjectCommentEmulation)
}

// run runs the transaction fill builds on nft.
func run(ctx context.Context, nft knftables.Interface, fill func(*knftables.Transaction)) error {
	tx := nft.NewTransaction()
	fill(tx)
	if err := nft.Run(ctx, tx); err != nil {
		return fmt.Errorf("nftables table %s: %w", TableName, err)
	}
	return nil
}

// Cleanup removes the gateway's table from the namespace at path, if it is there: what a
// gateway that did not end (kubelab killed) left.
func Cleanup(ctx context.Context, path string) error {
	nft, err := newNFTables(path)
	if err == nil {
		err = run(ctx, nft, deleteTable)
	}
	if err != nil {
		return fmt.Errorf("nat gateway cleanup: %w", err)
	}
	return nil
}
