package overlay

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/containernetworking/plugins/pkg/ns"
	"sigs.k8s.io/knftables"
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

// nftables runs transactions on the agent's table inside a network namespace:
// knftables execs nft, and a child exec'd from the locked thread of ns.Do starts in
// that thread's namespace.
type nftables struct {
	netns string
	nft   knftables.Interface
}

// newNFTables returns an nftables for the table in the namespace at path ("" = the
// caller's).
func newNFTables(path string) (*nftables, error) {
	n := &nftables{netns: path}
	err := n.do(func() error {
		nft, err := knftables.New(knftables.IPv4Family, TableName, knftables.NoObjectCommentEmulation)
		n.nft = nft
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("nftables: %w", err)
	}
	return n, nil
}

// run runs the transaction built by fill.
func (n *nftables) run(ctx context.Context, fill func(*knftables.Transaction)) error {
	tx := n.nft.NewTransaction()
	fill(tx)
	return n.do(func() error { return n.nft.Run(ctx, tx) })
}

func (n *nftables) do(f func() error) error {
	return inNS(n.netns, f)
}

// inNS runs f in the network namespace at path on a locked OS thread ("" = here).
func inNS(path string, f func() error) error {
	if path == "" {
		return f()
	}
	return ns.WithNetNSPath(path, func(ns.NetNS) error { return f() })
}
