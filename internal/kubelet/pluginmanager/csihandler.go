package pluginmanager

import (
	"context"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	csiclient "github.com/kubelab/kubelab/internal/csi/client"
)

const (
	// driverWaitTimeout is how long registration waits for a driver's socket to answer:
	// the registrar may serve before the driver does.
	driverWaitTimeout = 15 * time.Second
	// driverCallTimeout bounds each NodeGetInfo and NodeGetCapabilities call.
	driverCallTimeout = 5 * time.Second
)

// uninstallBackoff retries the removal of a driver from the API for about 3 s.
var uninstallBackoff = wait.Backoff{Steps: 5, Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1}

// registerCSI registers the CSI driver a registration socket announced: it checks the
// announcement, asks the driver for its node id, topology, volume limit and
// capabilities, records them in the Node and CSINode, then in the driver table.
func (m *Manager) registerCSI(ctx context.Context, regSocket string, info *registerapi.PluginInfo) error {
	name, endpoint := info.GetName(), info.GetEndpoint()
	if name == "" {
		return permanentError{fmt.Errorf("csi plugin at %s has no name", regSocket)}
	}
	if _, err := validateVersions(info.GetSupportedVersions()); err != nil {
		return permanentError{fmt.Errorf("csi driver %s: %w", name, err)}
	}
	if _, err := csiclient.Target(endpoint); err != nil {
		return permanentError{fmt.Errorf("csi driver %s: %w", name, err)}
	}
	conn, err := m.conn(name, endpoint)
	if err != nil {
		return err
	}
	ni, err := nodeGetInfo(ctx, conn)
	if err != nil {
		return fmt.Errorf("csi driver %s at %s: NodeGetInfo: %w", name, endpoint, err)
	}
	if ni.GetNodeId() == "" {
		return fmt.Errorf("csi driver %s at %s: NodeGetInfo returned an empty node id", name, endpoint)
	}
	caps, err := nodeCapabilities(ctx, conn)
	if err != nil {
		return fmt.Errorf("csi driver %s at %s: NodeGetCapabilities: %w", name, endpoint, err)
	}
	topology := ni.GetAccessibleTopology().GetSegments()
	m.apiMu.Lock()
	defer m.apiMu.Unlock()
	if err := m.installDriver(ctx, name, ni.GetNodeId(), ni.GetMaxVolumesPerNode(), topology); err != nil {
		return fmt.Errorf("csi driver %s: %w", name, err)
	}
	m.setDriver(&driverInfo{name: name, endpoint: endpoint, regSocket: regSocket, nodeID: ni.GetNodeId(), caps: caps})
	m.log.Info("csi driver registered", "driver", name, "endpoint", endpoint, "nodeID", ni.GetNodeId(),
		"maxVolumes", ni.GetMaxVolumesPerNode(), "topology", topology)
	return nil
}

// nodeGetInfo asks the driver for its node information, waiting up to driverWaitTimeout
// for its socket to answer.
func nodeGetInfo(ctx context.Context, conn *grpc.ClientConn) (*csi.NodeGetInfoResponse, error) {
	client := csi.NewNodeClient(conn)
	var resp *csi.NodeGetInfoResponse
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, driverWaitTimeout, true, func(ctx context.Context) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, driverCallTimeout)
		defer cancel()
		r, err := client.NodeGetInfo(cctx, &csi.NodeGetInfoRequest{})
		switch {
		case err == nil:
			resp = r
			return true, nil
		case status.Code(err) == codes.Unavailable:
			lastErr = err
			return false, nil
		}
		return false, err
	})
	switch {
	case err == nil:
		return resp, nil
	case lastErr != nil && ctx.Err() == nil && wait.Interrupted(err):
		// Timed out waiting: the driver's last answer says more than the timeout.
		return nil, fmt.Errorf("driver not reachable within %v: %w", driverWaitTimeout, lastErr)
	}
	return nil, err
}

// nodeCapabilities returns the driver's node service capabilities.
func nodeCapabilities(ctx context.Context, conn *grpc.ClientConn) (map[csi.NodeServiceCapability_RPC_Type]bool, error) {
	cctx, cancel := context.WithTimeout(ctx, driverCallTimeout)
	defer cancel()
	resp, err := csi.NewNodeClient(conn).NodeGetCapabilities(cctx, &csi.NodeGetCapabilitiesRequest{})
	if err != nil {
		return nil, err
	}
	caps := map[csi.NodeServiceCapability_RPC_Type]bool{}
	for _, c := range resp.GetCapabilities() {
		if t := c.GetRpc().GetType(); t != csi.NodeServiceCapability_RPC_UNKNOWN {
			caps[t] = true
		}
	}
	return caps, nil
}

// unregisterSocket unregisters the driver that registered through regSocket, if any: it
// leaves the driver table and the node's CSINode and nodeid annotation.
func (m *Manager) unregisterSocket(ctx context.Context, regSocket string) {
	m.apiMu.Lock()
	defer m.apiMu.Unlock()
	name, ok := m.takeDriverOf(regSocket)
	if !ok {
		return
	}
	err := retry.OnError(uninstallBackoff, func(error) bool { return ctx.Err() == nil }, func() error {
		return m.uninstallDriver(ctx, name)
	})
	if err != nil {
		m.log.Error("csi driver unregistered, but its node info stays", "driver", name, "err", err)
		return
	}
	m.log.Info("csi driver unregistered", "driver", name, "socket", regSocket)
}
