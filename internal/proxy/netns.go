package proxy

import (
	"context"
	"fmt"

	"github.com/containernetworking/plugins/pkg/ns"
	"sigs.k8s.io/knftables"
)

// inNetNS runs f on a thread inside the network namespace at path ("": the calling
// process's namespace). A process f starts (nft) inherits the namespace.
func inNetNS(path string, f func() error) error {
	if path == "" {
		return f()
	}
	netns, err := ns.GetNS(path)
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer netns.Close()
	return netns.Do(func(ns.NetNS) error { return f() })
}

// newNFTables opens the ip-family table of the namespace at path through the nft binary.
func newNFTables(path, table string) (knftables.Interface, error) {
	var nft knftables.Interface
	err := inNetNS(path, func() error {
		var err error
		nft, err = knftables.New(knftables.IPv4Family, table, knftables.UseNetlink)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("nftables in %q: %w", path, err)
	}
	if path == "" {
		return nft, nil
	}
	return &nsNFTables{Interface: nft, path: path}, nil
}

// nsNFTables runs every command of an Interface inside one network namespace.
type nsNFTables struct {
	knftables.Interface
	path string
}

func (n *nsNFTables) Run(ctx context.Context, tx *knftables.Transaction) error {
	return inNetNS(n.path, func() error { return n.Interface.Run(ctx, tx) })
}

func (n *nsNFTables) Check(ctx context.Context, tx *knftables.Transaction) error {
	return inNetNS(n.path, func() error { return n.Interface.Check(ctx, tx) })
}

func (n *nsNFTables) ListAll(ctx context.Context) (out map[string][]string, err error) {
	err = inNetNS(n.path, func() error { out, err = n.Interface.ListAll(ctx); return err })
	return out, err
}

func (n *nsNFTables) List(ctx context.Context, objectType string) (out []string, err error) {
	err = inNetNS(n.path, func() error { out, err = n.Interface.List(ctx, objectType); return err })
	return out, err
}

func (n *nsNFTables) ListRules(ctx context.Context, chain string) (out []*knftables.Rule, err error) {
	err = inNetNS(n.path, func() error { out, err = n.Interface.ListRules(ctx, chain); return err })
	return out, err
}

func (n *nsNFTables) ListElements(ctx context.Context, objectType, name string) (out []*knftables.Element, err error) {
	err = inNetNS(n.path, func() error { out, err = n.Interface.ListElements(ctx, objectType, name); return err })
	return out, err
}

func (n *nsNFTables) ListCounters(ctx context.Context) (out []*knftables.Counter, err error) {
	err = inNetNS(n.path, func() error { out, err = n.Interface.ListCounters(ctx); return err })
	return out, err
}
