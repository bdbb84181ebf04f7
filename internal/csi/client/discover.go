package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
)

// Info is what a sidecar learns from its driver at start.
type Info struct {
	Name           string
	ControllerCaps map[csi.ControllerServiceCapability_RPC_Type]bool
	// ControllerService and Topology are the plugin capabilities CONTROLLER_SERVICE and
	// VOLUME_ACCESSIBILITY_CONSTRAINTS.
	ControllerService bool
	Topology          bool
}

// Has says whether the driver's controller offers capability c.
func (i Info) Has(c csi.ControllerServiceCapability_RPC_Type) bool { return i.ControllerCaps[c] }

// Discover waits (retrying every interval) until the driver answers Probe as ready,
// then asks its name and capabilities. It returns when ctx ends.
func Discover(ctx context.Context, conn *grpc.ClientConn, interval time.Duration) (Info, error) {
	if interval <= 0 {
		interval = 200 * time.Millisecond
	}
	id := csi.NewIdentityClient(conn)
	for {
		resp, err := id.Probe(ctx, &csi.ProbeRequest{})
		if err == nil && (resp.GetReady() == nil || resp.GetReady().GetValue()) {
			break
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New("driver not ready")
			}
			return Info{}, fmt.Errorf("probe csi driver: %w (%w)", ctx.Err(), err)
		case <-time.After(interval):
		}
	}
	info := Info{ControllerCaps: map[csi.ControllerServiceCapability_RPC_Type]bool{}}
	pi, err := id.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil {
		return Info{}, fmt.Errorf("GetPluginInfo: %w", err)
	}
	info.Name = pi.GetName()
	pc, err := id.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
	if err != nil {
		return Info{}, fmt.Errorf("GetPluginCapabilities: %w", err)
	}
	for _, c := range pc.GetCapabilities() {
		switch c.GetService().GetType() {
		case csi.PluginCapability_Service_CONTROLLER_SERVICE:
			info.ControllerService = true
		case csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS:
			info.Topology = true
		}
	}
	if info.ControllerService {
		cc, err := csi.NewControllerClient(conn).ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
		if err != nil {
			return Info{}, fmt.Errorf("ControllerGetCapabilities: %w", err)
		}
		for _, c := range cc.GetCapabilities() {
			info.ControllerCaps[c.GetRpc().GetType()] = true
		}
	}
	return info, nil
}

// DiscoverDriver is Discover for a sidecar configured with want ("" takes whatever the
// driver reports): it fails, naming component, when the driver cannot be reached or
// reports another name.
func DiscoverDriver(ctx context.Context, conn *grpc.ClientConn, component, want string) (Info, error) {
	info, err := Discover(ctx, conn, 0)
	if err != nil {
		return Info{}, fmt.Errorf("%s: %w", component, err)
	}
	if want != "" && info.Name != want {
		return Info{}, fmt.Errorf("%s: driver reports name %q, configured for %q", component, info.Name, want)
	}
	return info, nil
}
