package netns

import (
	"context"
	"fmt"

	"sigs.k8s.io/knftables"
)

// NFTables opens table of family in the namespace at path ("" = the caller's) with
// knftables' options; every call of the Interface that reaches the kernel runs inside
// the namespace (knftables execs nft, which is born in its thread's namespace).
func NFTables(path string, family knftables.Family, table string, options ...knftables.Option) (knftables.Interface, error) {
	var nft knftables.Interface
	err := Do(path, func() (err error) {
		nft, err = knftables.New(family, table, options...)
		return err
	})
	if err != nil {
		if path == "" {
			return nil, fmt.Errorf("nftables table %s: %w", table, err)
		}
		return nil, fmt.Errorf("nftables table %s in %s: %w", table, path, err)
	}
	if path == "" {
		return nft, nil
	}
	return &nsNFTables{Interface: nft, path: path}, nil
}

// nsNFTables runs every command of an Interface inside the namespace at path;
// NewTransaction, which only builds, runs where it is called.
type nsNFTables struct {
	knftables.Interface
	path string
}

func (n *nsNFTables) Run(ctx context.Context, tx *knftables.Transaction) error {
	return Do(n.path, func() error { return n.Interface.Run(ctx, tx) })
}

func (n *nsNFTables) Check(ctx context.Context, tx *knftables.Transaction) error {
	return Do(n.path, func() error { return n.Interface.Check(ctx, tx) })
}

func (n *nsNFTables) ListAll(ctx context.Context) (out map[string][]string, err error) {
	err = Do(n.path, func() error { out, err = n.Interface.ListAll(ctx); return err })
	return out, err
}

func (n *nsNFTables) List(ctx context.Context, objectType string) (out []string, err error) {
	err = Do(n.path, func() error { out, err = n.Interface.List(ctx, objectType); return err })
	return out, err
}

func (n *nsNFTables) ListRules(ctx context.Context, chain string) (out []*knftables.Rule, err error) {
	err = Do(n.path, func() error { out, err = n.Interface.ListRules(ctx, chain); return err })
	return out, err
}

func (n *nsNFTables) ListElements(ctx context.Context, objectType, name string) (out []*knftables.Element, err error) {
	err = Do(n.path, func() error { out, err = n.Interface.ListElements(ctx, objectType, name); return err })
	return out, err
}

func (n *nsNFTables) ListCounters(ctx context.Context) (out []*knftables.Counter, err error) {
	err = Do(n.path, func() error { out, err = n.Interface.ListCounters(ctx); return err })
	return out, err
}
