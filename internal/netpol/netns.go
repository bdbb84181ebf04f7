package netpol

import (
	"context"
	"fmt"

	"github.com/containernetworking/plugins/pkg/ns"
	"sigs.k8s.io/knftables"
)

// nsNFTables is a knftables.Interface whose every call runs on a thread inside a network
// namespace, so that the nft process it starts inherits that namespace.
type nsNFTables struct {
	netns ns.NetNS
	nft   knftables.Interface
}

// openNFTables opens table (family ip) in the network namespace at path ("" is the
// calling thread's). closeNS releases the namespace handle.
func openNFTables(path, table string) (nft knftables.Interface, closeNS func() error, err error) {
	if path == "" {
		nft, err = knftables.New(knftables.IPv4Family, table)
		if err != nil {
			return nil, nil, fmt.Errorf("nftables table %s: %w", table, err)
		}
		return nft, func() error { return nil }, nil
	}
	netns, err := ns.GetNS(path)
	if err != nil {
		return nil, nil, fmt.Errorf("node network namespace %s: %w", path, err)
	}
	n := &nsNFTables{netns: netns}
	if err := netns.Do(func(ns.NetNS) error {
		n.nft, err = knftables.New(knftables.IPv4Family, table)
		return err
	}); err != nil {
		netns.Close()
		return nil, nil, fmt.Errorf("nftables table %s in %s: %w", table, path, err)
	}
	return n, netns.Close, nil
}

func (n *nsNFTables) do(f func() error) error {
	return n.netns.Do(func(ns.NetNS) error { return f() })
}

func (n *nsNFTables) NewTransaction() *knftables.Transaction { return n.nft.NewTransaction() }

func (n *nsNFTables) Run(ctx context.Context, tx *knftables.Transaction) error {
	return n.do(func() error { return n.nft.Run(ctx, tx) })
}

func (n *nsNFTables) Check(ctx context.Context, tx *knftables.Transaction) error {
	return n.do(func() error { return n.nft.Check(ctx, tx) })
}

func (n *nsNFTables) ListAll(ctx context.Context) (out map[string][]string, err error) {
	err = n.do(func() error { out, err = n.nft.ListAll(ctx); return err })
	return out, err
}

func (n *nsNFTables) List(ctx context.Context, objectType string) (out []string, err error) {
	err = n.do(func() error { out, err = n.nft.List(ctx, objectType); return err })
	return out, err
}

func (n *nsNFTables) ListRules(ctx context.Context, chain string) (out []*knftables.Rule, err error) {
	err = n.do(func() error { out, err = n.nft.ListRules(ctx, chain); return err })
	return out, err
}

func (n *nsNFTables) ListElements(ctx context.Context, objectType, name string) (out []*knftables.Element, err error) {
	err = n.do(func() error { out, err = n.nft.ListElements(ctx, objectType, name); return err })
	return out, err
}

func (n *nsNFTables) ListCounters(ctx context.Context) (out []*knftables.Counter, err error) {
	err = n.do(func() error { out, err = n.nft.ListCounters(ctx); return err })
	return out, err
}
