package overlay

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"
)

// Modes of carrying pod traffic between nodes.
const (
	// ModeVXLAN encapsulates pod traffic in VXLAN over the underlay (the default).
	ModeVXLAN = "vxlan"
	// ModeDirect routes each remote pod subnet via the remote node's underlay
	// address; it needs the nodes to share one L2 segment.
	ModeDirect = "direct"
)

// Defaults of Config.
const (
	DefaultUnderlay     = "eth0"
	DefaultVNI          = 1
	DefaultPort         = 8472
	DefaultDevice       = "kubelab.1"
	DefaultClusterCIDR  = "10.244.0.0/16"
	DefaultResyncPeriod = 30 * time.Second
)

// vxlanOverhead is what VXLAN over IPv4 adds to each frame: outer IPv4 (20), UDP (8),
// VXLAN (8) and the inner Ethernet header (14).
const vxlanOverhead = 50

// Config says which node the agent serves and how it links pod subnets.
type Config struct {
	// NodeName is the agent's own Node; every other Node is remote.
	NodeName string
	// NetNS is the path of the node's network namespace, where all links, routes,
	// neighbours and nftables rules are made; "" is the agent's own namespace.
	NetNS string
	// Underlay is the node's VPC-facing interface (DefaultUnderlay when empty).
	Underlay string
	// Mode is ModeVXLAN (when empty) or ModeDirect.
	Mode string
	// VNI is the VXLAN network identifier (DefaultVNI when zero).
	VNI int
	// Port is the VXLAN UDP port (DefaultPort when zero).
	Port int
	// Device is the name of the VXLAN device (DefaultDevice when empty).
	Device string
	// ClusterCIDR is the pod network (DefaultClusterCIDR when empty). Routes are
	// only made, and only removed, for subnets inside it, and pod traffic leaving it
	// through the underlay is masqueraded.
	ClusterCIDR string
	// ResyncPeriod is how often the whole state is compared with the kernel's and
	// repaired (DefaultResyncPeriod when zero).
	ResyncPeriod time.Duration
	// Logger receives the agent's logs (slog.Default() when nil).
	Logger *slog.Logger
}

// withDefaults returns c with its empty fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Underlay == "" {
		c.Underlay = DefaultUnderlay
	}
	if c.Mode == "" {
		c.Mode = ModeVXLAN
	}
	if c.VNI == 0 {
		c.VNI = DefaultVNI
	}
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if c.Device == "" {
		c.Device = DefaultDevice
	}
	if c.ClusterCIDR == "" {
		c.ClusterCIDR = DefaultClusterCIDR
	}
	if c.ResyncPeriod == 0 {
		c.ResyncPeriod = DefaultResyncPeriod
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate checks a Config that has its defaults.
func (c *Config) validate() error {
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("node name is empty"))
	}
	if c.Mode != ModeVXLAN && c.Mode != ModeDirect {
		errs = append(errs, fmt.Errorf("mode %q is neither %q nor %q", c.Mode, ModeVXLAN, ModeDirect))
	}
	if c.VNI < 1 || c.VNI > 1<<24-1 {
		errs = append(errs, fmt.Errorf("vni %d is outside 1-16777215", c.VNI))
	}
	if c.Port < 1 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("port %d is outside 1-65535", c.Port))
	}
	if err := checkLinkName(c.Device); err != nil {
		errs = append(errs, fmt.Errorf("device: %w", err))
	}
	if err := checkLinkName(c.Underlay); err != nil {
		errs = append(errs, fmt.Errorf("underlay: %w", err))
	}
	if c.Device == c.Underlay {
		errs = append(errs, fmt.Errorf("device and underlay are both %q", c.Device))
	}
	if _, err := parseClusterCIDR(c.ClusterCIDR); err != nil {
		errs = append(errs, err)
	}
	if c.ResyncPeriod < 0 {
		errs = append(errs, fmt.Errorf("resync period %s is negative", c.ResyncPeriod))
	}
	return errors.Join(errs...)
}

// checkLinkName checks name against the kernel's rules for interface names.
func checkLinkName(name string) error {
	switch {
	case name == "":
		return errors.New("interface name is empty")
	case len(name) > 15:
		return fmt.Errorf("interface name %q is longer than 15 bytes", name)
	case name == "." || name == "..":
		return fmt.Errorf("interface name %q is not allowed", name)
	case strings.ContainsAny(name, "/: \t\n\r\x00"):
		return fmt.Errorf("interface name %q holds '/', ':' or white space", name)
	}
	return nil
}

// parseClusterCIDR parses an IPv4 prefix in canonical form (no host bits set).
func parseClusterCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("cluster CIDR %q: %w", s, err)
	}
	if !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("cluster CIDR %q is not IPv4", s)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("cluster CIDR %q has host bits set (the network is %s)", s, p.Masked())
	}
	return p, nil
}
