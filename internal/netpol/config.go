package netpol

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/informers"
	"sigs.k8s.io/knftables"
)

// DefaultTable is the nftables table (family ip) the agent owns in the node namespace.
const DefaultTable = "kubelab-netpol"

// Config says which node an Agent enforces policy for and where.
type Config struct {
	// NodeName is the Node whose pods (spec.nodeName) the agent protects.
	NodeName string
	// NetNS is the path of the node's network namespace (/var/run/netns/…); every nft
	// command runs inside it. "" uses the namespace of the calling thread.
	NetNS string
	// Table is the nftables table of family ip the agent owns; default DefaultTable.
	Table string
	// FullSyncPeriod is how often the agent rewrites the whole table, repairing changes
	// made behind its back; default one minute.
	FullSyncPeriod time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if c.FullSyncPeriod == 0 {
		c.FullSyncPeriod = time.Minute
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
	if c.Table != "" && !validName(c.Table) {
		errs = append(errs, fmt.Errorf("table %q: want a letter then letters, digits, '-', '_' or '.'", c.Table))
	}
	if c.FullSyncPeriod < 0 {
		errs = append(errs, fmt.Errorf("full sync period %v: must not be negative", c.FullSyncPeriod))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("netpol config: %w", err)
	}
	return nil
}

// Option changes how New and Cleanup reach their dependencies.
type Option func(*options)

type options struct {
	nft     knftables.Interface
	factory informers.SharedInformerFactory
}

// WithNFTables makes the agent use nft (for instance knftables.NewFake(knftables.IPv4Family,
// table)) instead of running the nft binary inside Config.NetNS.
func WithNFTables(nft knftables.Interface) Option {
	return func(o *options) { o.nft = nft }
}

// WithInformerFactory makes the agent register its informers on factory, which the caller
// starts, instead of starting a factory of its own.
func WithInformerFactory(factory informers.SharedInformerFactory) Option {
	return func(o *options) { o.factory = factory }
}
