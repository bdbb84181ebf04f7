package csiclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Dial connects to the CSI driver at endpoint (unix:///path/csi.sock or an absolute
// path). The connection is lazy: Discover waits for the driver.
func Dial(endpoint string) (*grpc.ClientConn, error) {
	target, err := Target(endpoint)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial csi driver %s: %w", endpoint, err)
	}
	return conn, nil
}

// Target turns an endpoint into a gRPC unix target.
func Target(endpoint string) (string, error) {
	switch {
	case endpoint == "":
		return "", errors.New("csi endpoint is empty: want unix:///path/csi.sock")
	case strings.HasPrefix(endpoint, "unix://"):
		if !strings.HasPrefix(strings.TrimPrefix(endpoint, "unix://"), "/") {
			return "", fmt.Errorf("csi endpoint %q: socket path must be absolute", endpoint)
		}
		return endpoint, nil
	case strings.HasPrefix(endpoint, "/"):
		return "unix://" + endpoint, nil
	default:
		return "", fmt.Errorf("csi endpoint %q: want unix:///path/csi.sock", endpoint)
	}
}

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

// IsFinal says whether a CSI call's error is final: the driver has certainly not
// started the operation, or refused it for good, so retrying the same request
// would not help (as the external sidecars classify them). Timeouts, Aborted and
// Unavailable are not final: the operation may still be under way.
func IsFinal(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch st.Code() {
	case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable, codes.ResourceExhausted, codes.Aborted, codes.Unknown:
		return false
	}
	return true
}

// Code is the gRPC code of err (codes.Unknown for non-status errors).
func Code(err error) codes.Code { return status.Code(err) }
