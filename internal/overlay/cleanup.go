package overlay

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/kubelab/kubelab/internal/util/netns"
)

// Cleanup removes what an agent made in the network namespace at netnsPath ("" =
// the caller's), for a node's teardown: the VXLAN device named device
// (DefaultDevice when empty) with the neighbour and FDB entries on it, the routes
// the agent made, and the nftables table TableName. Pieces already gone are no
// error; it removes what it can and reports every failure.
func Cleanup(ctx context.Context, netnsPath, device string) error {
	if device == "" {
		device = DefaultDevice
	}
	if err := checkLinkName(device); err != nil {
		return fmt.Errorf("overlay cleanup: device: %w", err)
	}
	h, err := netns.Handle(netnsPath)
	if err != nil {
		return fmt.Errorf("overlay cleanup: %w", err)
	}
	defer h.Close()
	dp := &dataplane{h: h, device: device, cluster: netip.MustParsePrefix("0.0.0.0/0")}
	var errs []error
	if _, err := dp.removeDevice(); err != nil {
		errs = append(errs, err)
	}
	if err := dp.removeRoutes(); err != nil {
		errs = append(errs, err)
	}
	nft, err := newNFTables(netnsPath)
	if err == nil {
		err = nft.run(ctx, deleteTable)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("delete table %s: %w", TableName, err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("overlay cleanup: %w", err)
	}
	return nil
}
