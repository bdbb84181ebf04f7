package overlay

import (
	"context"
	"fmt"
	"net/netip"

	"sigs.k8s.io/knftables"

	"github.com/kubelab/kubelab/internal/util/netns"
)

// TableName is the nftables table (family ip) of the agent, in the node's namespace.
const TableName = "kubelab-overlay"

// masqueradeChain is the table's one chain, at the srcnat hook.
const masqueradeChain = "postrouting"

// masqueradeRules adds to tx the whole table, replacing what it held: pod traffic
// (source in cluster) to anywhere outside cluster that leaves through underlay gets
// the underlay's address as source, so that hosts of the VPC with no route to the pod
// network can answer. Pod-to-pod traffic keeps its addresses.
func masqueradeRules(tx *knftables.Transaction, cluster netip.Prefix, underlay string) {
	tx.Add(&knftables.Table{})
	tx.Add(&knftables.Chain{
		Name:     masqueradeChain,
		Type:     knftables.PtrTo(knftables.NATType),
		Hook:     knftables.PtrTo(knftables.PostroutingHook),
		Priority: knftables.PtrTo(knftables.SNATPriority),
	})
	tx.Flush(&knftables.Chain{Name: masqueradeChain})
	tx.Add(&knftables.Rule{
		Chain: masqueradeChain,
		Rule: knftables.Concat(
			"ip saddr", cluster.String(),
			"ip daddr !=", cluster.String(),
			"oifname", fmt.Sprintf("%q", underlay),
			"masquerade",
		),
		Comment: knftables.PtrTo("pod traffic leaving the cluster network"),
	})
}

// deleteTable adds to tx the deletion of the table, whether it exists or not.
func deleteTable(tx *knftables.Transaction) {
	tx.Add(&knftables.Table{})
	tx.Delete(&knftables.Table{})
}

// nftables runs transactions on the agent's table inside a network namespace.
type nftables struct {
	nft knftables.Interface
}

// newNFTables returns an nftables for the table in the namespace at path ("" = the
// caller's).
func newNFTables(path string) (*nftables, error) {
	nft, err := netns.NFTables(path, knftables.IPv4Family, TableName, knftables.NoObjectCommentEmulation)
	if err != nil {
		return nil, err
	}
	return &nftables{nft: nft}, nil
}

// run runs the transaction built by fill.
func (n *nftables) run(ctx context.Context, fill func(*knftables.Transaction)) error {
	tx := n.nft.NewTransaction()
	fill(tx)
	return n.nft.Run(ctx, tx)
}
