package proxy

import (
	"context"
	"fmt"

	"sigs.k8s.io/knftables"
)

// Cleanup deletes the proxy's table (ip family) from the network namespace at netns (""
// is the calling process's), with every Service rule in it; a table that is not there is
// no error. The proxy itself leaves its table when it stops, so that Services keep working
// across a restart; Cleanup is for the node's teardown.
func Cleanup(ctx context.Context, netns, table string) error {
	if table == "" {
		table = DefaultTable
	}
	nft, err := newNFTables(netns, table)
	if err != nil {
		return fmt.Errorf("clean up table %s: %w", table, err)
	}
	tx := nft.NewTransaction()
	tx.Delete(&knftables.Table{})
	if err := nft.Run(ctx, tx); err != nil && !knftables.IsNotFound(err) {
		return fmt.Errorf("clean up table %s: %w", table, err)
	}
	return nil
}
