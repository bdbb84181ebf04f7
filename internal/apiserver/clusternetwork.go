package apiserver

import (
	"context"
	"net"
	"time"
)

// dialFunc connects to a network address, as net.Dialer.DialContext does.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// clusterDialer is how the server reaches the cluster's network: Config.ClusterDial, or
// a plain dialer from the process's own network namespace.
func clusterDialer(cfg Config) dialFunc {
	if cfg.ClusterDial != nil {
		return cfg.ClusterDial
	}
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return d.DialContext
}
