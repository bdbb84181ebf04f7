package apiserver

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
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

// newClusterTransport is the proxy subresources' transport toward pods, Service
// endpoints and nodes' other ports: dialled through dial, HTTP/1.1 (upgrades are proxied
// as they are), and, as kube-apiserver's proxy transport, without verifying an https
// backend's certificate: a pod's serving certificate names nothing the API server could
// check it against.
func newClusterTransport(dial dialFunc) *http.Transport {
	return &http.Transport{
		DialContext:         dial,
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as kube-apiserver's proxy transport
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 25,
		IdleConnTimeout:     90 * time.Second,
	}
}
