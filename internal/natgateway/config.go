package natgateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
)

// Config says where the gateway works and where it connects from.
type Config struct {
	// NetNS is the path of the VPC's network namespace, where the rules are made and the
	// listener given to Serve is.
	NetNS string
	// ClusterRanges are the cluster's own ranges (the VPC's, the pods', the Services'),
	// which the gateway never carries: traffic to them stays in the cluster.
	ClusterRanges []netip.Prefix
	// Dial connects to an outside address ("tcp", "ip:port"), as net.Dialer.DialContext
	// does (which it is when nil, from the caller's namespace).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) validate() error {
	var errs []error
	if !filepath.IsAbs(c.NetNS) {
		errs = append(errs, fmt.Errorf("network namespace %q must be an absolute path", c.NetNS))
	}
	if len(c.ClusterRanges) == 0 {
		errs = append(errs, errors.New("the cluster's ranges are required"))
	}
	for _, p := range c.ClusterRanges {
		if !p.IsValid() || !p.Addr().Is4() {
			errs = append(errs, fmt.Errorf("cluster range %q is not an IPv4 prefix", p))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("nat gateway config: %w", err)
	}
	return nil
}

func (c *Config) defaults() {
	if c.Dial == nil {
		c.Dial = (&net.Dialer{}).DialContext
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}
