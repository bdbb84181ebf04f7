package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"sigs.k8s.io/knftables"
)

// Defaults of Config.
const (
	// DefaultTable is the nftables table (ip family) the proxy owns in a node's namespace.
	DefaultTable = "kubelab-proxy"
	// DefaultMinSyncPeriod is the least time between two syncs after the first two of a
	// burst.
	DefaultMinSyncPeriod = time.Second
	// DefaultSyncPeriod is the time between two full resyncs. A full sync rewrites every
	// chain and map (a few hundred milliseconds for 1,000 Services of 10 endpoints) while
	// the syncs between write exactly what changed, so it is rare, as kube-proxy's own full
	// syncs are.
	DefaultSyncPeriod = time.Hour
)

// Config is one node's service proxy.
type Config struct {
	// NodeName is this node's Node; endpoints whose nodeName it is are local (they serve
	// externalTrafficPolicy: Local and internalTrafficPolicy: Local).
	NodeName string
	// NodeIPs are the node's addresses that answer on NodePorts (e.g. 172.31.x.y). Empty:
	// NodePorts answer on every local address but 127.0.0.0/8.
	NodeIPs []string
	// ClusterCIDR is the pods' range (10.244.0.0/16): traffic to a Service from outside it
	// is masqueraded so that replies come back through this node.
	ClusterCIDR string
	// NetNS is the path of the node's network namespace; every nft command runs inside it.
	// "" is the namespace of the calling process.
	NetNS string
	// Table is the nftables table (ip family); default DefaultTable.
	Table string
	// MinSyncPeriod rate-limits syncs (bursts of two pass at once); default
	// DefaultMinSyncPeriod. Negative: no limit.
	MinSyncPeriod time.Duration
	// SyncPeriod is the time between full resyncs; default DefaultSyncPeriod.
	SyncPeriod time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if c.MinSyncPeriod == 0 {
		c.MinSyncPeriod = DefaultMinSyncPeriod
	}
	if c.SyncPeriod == 0 {
		c.SyncPeriod = DefaultSyncPeriod
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

func (c *Config) validate() error {
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("node name is required"))
	}
	for _, s := range c.NodeIPs {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() || a.IsLoopback() {
			errs = append(errs, fmt.Errorf("node IP %q: want an IPv4 address that is not loopback", s))
		}
	}
	if p, err := netip.ParsePrefix(c.ClusterCIDR); err != nil || !p.Addr().Is4() || p.Masked() != p {
		errs = append(errs, fmt.Errorf("cluster CIDR %q: want an IPv4 network such as 10.244.0.0/16", c.ClusterCIDR))
	}
	if c.Table == "" || len(c.Table) > knftables.NameLengthMax {
		errs = append(errs, fmt.Errorf("table %q: want a name of 1 to %d bytes", c.Table, knftables.NameLengthMax))
	}
	if c.SyncPeriod < 0 {
		errs = append(errs, fmt.Errorf("sync period %v: must not be negative", c.SyncPeriod))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("proxy config: %w", err)
	}
	return nil
}

// params are the node-wide inputs of the rules.
func (c *Config) params() Params {
	return Params{NodeName: c.NodeName, ClusterCIDR: c.ClusterCIDR}
}
