package ipamd

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strconv"
	"time"
)

// The environment of aws-node that the manager reads (EnvTargets).
const (
	EnvWarmENITarget   = "WARM_ENI_TARGET"
	EnvWarmIPTarget    = "WARM_IP_TARGET"
	EnvMinimumIPTarget = "MINIMUM_IP_TARGET"
	EnvIPCooldown      = "IP_COOLDOWN_PERIOD"
)

// SocketFile is the manager's API socket in its dir.
const SocketFile = "ipamd.sock"

// Defaults.
const (
	DefaultIPCooldown = 30 * time.Second
	// DefaultResyncPeriod is how often the pool is compared with the cloud's ENIs.
	DefaultResyncPeriod = time.Minute
	// DefaultPoolPeriod is how often the warm pool is reconsidered without a pod asking.
	DefaultPoolPeriod = 5 * time.Second
)

// Config is one node's IP address manager.
type Config struct {
	// NodeName names the node in logs.
	NodeName string
	// InstanceID is the node's instance (its providerID's last part).
	InstanceID string
	// ClusterName tags the ENIs it creates (cluster.k8s.amazonaws.com/name); optional.
	ClusterName string
	// NetNS is the node's network namespace (a path): the ENIs' interfaces are there.
	NetNS string
	// Dir holds the checkpoint (the node's aws-node dir).
	Dir string
	// Socket is the API's unix socket (Dir/ipamd.sock when empty).
	Socket string
	// VPCCIDR is the VPC's range: pod traffic to anywhere else is SNATed to the node's
	// primary address.
	VPCCIDR netip.Prefix
	// RouterIP is the VPC router's address, the secondary ENIs' tables' default gateway.
	RouterIP netip.Addr
	// Targets of the warm pool.
	Targets Targets
	// IPCooldown keeps a released address from another pod, and in the pool, this long
	// (DefaultIPCooldown when zero).
	IPCooldown time.Duration
	// ResyncPeriod, PoolPeriod: DefaultResyncPeriod, DefaultPoolPeriod when zero.
	ResyncPeriod, PoolPeriod time.Duration
	// AddTimeout bounds how long an ADD waits for an address the pool is still getting (20 s).
	AddTimeout time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now is the clock (time.Now).
	Now func() time.Time
	// SkipNetwork leaves the node's interfaces, rules and nftables alone (unit tests).
	SkipNetwork bool
}

func (c *Config) setDefaults() {
	if c.Socket == "" {
		c.Socket = filepath.Join(c.Dir, SocketFile)
	}
	if c.IPCooldown == 0 {
		c.IPCooldown = DefaultIPCooldown
	}
	if c.ResyncPeriod == 0 {
		c.ResyncPeriod = DefaultResyncPeriod
	}
	if c.PoolPeriod == 0 {
		c.PoolPeriod = DefaultPoolPeriod
	}
	if c.AddTimeout == 0 {
		c.AddTimeout = 20 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

func (c *Config) validate() error {
	var errs []error
	if c.InstanceID == "" {
		errs = append(errs, errors.New("instance id is required"))
	}
	if !filepath.IsAbs(c.Dir) {
		errs = append(errs, fmt.Errorf("dir %q must be absolute", c.Dir))
	}
	if !c.SkipNetwork && !filepath.IsAbs(c.NetNS) {
		errs = append(errs, fmt.Errorf("node network namespace %q must be an absolute path", c.NetNS))
	}
	if !c.VPCCIDR.IsValid() || !c.VPCCIDR.Addr().Is4() {
		errs = append(errs, fmt.Errorf("vpc cidr %v: want an IPv4 range", c.VPCCIDR))
	}
	if !c.SkipNetwork && !c.RouterIP.Is4() {
		errs = append(errs, fmt.Errorf("router ip %v: want an IPv4 address", c.RouterIP))
	}
	if c.Targets.WarmENI < 0 || c.Targets.WarmIP < 0 || c.Targets.MinimumIP < 0 {
		errs = append(errs, fmt.Errorf("warm pool targets %+v must not be negative", c.Targets))
	}
	if c.IPCooldown < 0 || c.ResyncPeriod < 0 || c.PoolPeriod < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("ipamd config: %w", err)
	}
	return nil
}

// EnvTargets reads WARM_ENI_TARGET, WARM_IP_TARGET, MINIMUM_IP_TARGET and
// IP_COOLDOWN_PERIOD (seconds) from getenv, as aws-node does; unset ones stay zero.
func EnvTargets(getenv func(string) string) (Targets, time.Duration, error) {
	var t Targets
	var errs []error
	for name, dst := range map[string]*int{EnvWarmENITarget: &t.WarmENI, EnvWarmIPTarget: &t.WarmIP, EnvMinimumIPTarget: &t.MinimumIP} {
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				errs = append(errs, fmt.Errorf("%s=%q: want a number of 0 or more", name, v))
				continue
			}
			*dst = n
		}
	}
	var cooldown time.Duration
	if v := getenv(EnvIPCooldown); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want seconds, 0 or more", EnvIPCooldown, v))
		} else {
			cooldown = time.Duration(n) * time.Second
		}
	}
	return t, cooldown, errors.Join(errs...)
}
