package cloud

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"
)

// Config configures a Cloud.
type Config struct {
	// DataDir holds state.db, the volume and snapshot files, the instances' device dirs
	// and the endpoint, aws-config and aws-credentials files. Required.
	DataDir string
	// Listen is the API's address; it must be on 127.0.0.1. Default 127.0.0.1:0: the port
	// of the previous start on DataDir, or a free port at the first start.
	Listen string
	// Region is the one region served. Default us-east-1.
	Region string
	// Zones are the region's availability zones. Default <region>a, b and c.
	Zones []string
	// Hollow serves the same API and states with no files, loop devices or links.
	Hollow bool
	// Profile names the latencies of the asynchronous transitions: "fast" (default) or "aws".
	Profile string
	// MaxVolumes caps the number of volumes (VolumeLimitExceeded beyond). Default 5000.
	MaxVolumes int
	// ReleaseOnExit makes Run detach the loop devices and remove the links it made when
	// it returns; the API state is kept and the next Run sets them up again.
	ReleaseOnExit bool
	// NoIMDSListeners disables the per-instance IMDS listeners on loopback ports
	// (IMDSHandler still serves; the cluster mounts it where it wants).
	NoIMDSListeners bool
	// Dial reaches the load balancers' targets (instances' private addresses, pod
	// addresses): the VPC's network in a cluster. Default: a plain dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// IssuerDial reaches OIDC issuers (clusters' API servers) when STS checks a web
	// identity token: it fetches the issuer's discovery document and keys over HTTPS.
	// Default: a plain dialer.
	IssuerDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// IssuerRootCAs verify issuers' certificates for OIDC providers that list no
	// thumbprint (with thumbprints, the certificate they name is the trust anchor).
	// Default: the system's roots.
	IssuerRootCAs *x509.CertPool
	// HostsFile is the hosts file where the cloud keeps its active load balancers' DNS
	// names (a block of its own); "" keeps none.
	HostsFile string
	// LoadBalancerCIDR is the block of 127.0.0.0/8 load balancers take their addresses
	// from. Default: the block of the previous start on DataDir, or at the first start a
	// /24 in 127.128.0.0/9 on which nothing listens.
	LoadBalancerCIDR string
	// Fabric carries the VPC's traffic to the instances' network interfaces (nil: none,
	// as in hollow mode); the cloud tells it every change of them.
	Fabric NetworkFabric
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
}

// Latencies are the durations of the asynchronous transitions.
type Latencies struct {
	Create, Attach, Detach, Delete time.Duration
	ModifyToOptimizing, Optimize   time.Duration
	Snapshot, Terminate            time.Duration
	// LoadBalancer is how long a new load balancer stays provisioning.
	LoadBalancer time.Duration
	// HealthCheckDivisor divides target groups' health check intervals and timeouts and
	// their deregistration delay: the time the checks really take (1 means as configured).
	HealthCheckDivisor int
}

// profiles are the named latency sets. "aws" follows what EC2 users observe: seconds for
// create, attach and detach; tens of seconds for modifications and snapshots.
var profiles = map[string]Latencies{
	"fast": {HealthCheckDivisor: 10},
	"aws": {
		Create: 2 * time.Second, Attach: 3 * time.Second, Detach: 4 * time.Second,
		Delete: 1 * time.Second, ModifyToOptimizing: 5 * time.Second, Optimize: 20 * time.Second,
		Snapshot: 15 * time.Second, Terminate: 5 * time.Second,
		LoadBalancer: 30 * time.Second, HealthCheckDivisor: 1,
	},
}

func (c *Config) withDefaults() Config {
	out := *c
	if out.Listen == "" {
		out.Listen = "127.0.0.1:0"
	}
	if out.Region == "" {
		out.Region = "us-east-1"
	}
	if len(out.Zones) == 0 {
		out.Zones = []string{out.Region + "a", out.Region + "b", out.Region + "c"}
	}
	if out.Profile == "" {
		out.Profile = "fast"
	}
	if out.MaxVolumes == 0 {
		out.MaxVolumes = 5000
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	return out
}

func (c *Config) validate() error {
	if c.DataDir == "" {
		return errors.New("config: data dir is required")
	}
	if !filepath.IsAbs(c.DataDir) {
		return fmt.Errorf("config: data dir %q must be an absolute path", c.DataDir)
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("config: listen address %q: %w", c.Listen, err)
	}
	if host != "127.0.0.1" {
		return fmt.Errorf("config: listen address %q must be on 127.0.0.1", c.Listen)
	}
	if c.Region == "" || strings.ContainsAny(c.Region, " /") {
		return fmt.Errorf("config: invalid region %q", c.Region)
	}
	seen := map[string]bool{}
	for _, z := range c.Zones {
		if !strings.HasPrefix(z, c.Region) || len(z) <= len(c.Region) {
			return fmt.Errorf("config: zone %q is not in region %q", z, c.Region)
		}
		if seen[z] {
			return fmt.Errorf("config: zone %q given twice", z)
		}
		seen[z] = true
	}
	if _, ok := profiles[c.Profile]; !ok {
		return fmt.Errorf("config: unknown profile %q (want fast or aws)", c.Profile)
	}
	if c.HostsFile != "" && !filepath.IsAbs(c.HostsFile) {
		return fmt.Errorf("config: hosts file %q must be an absolute path", c.HostsFile)
	}
	if c.LoadBalancerCIDR != "" {
		if _, err := parseLBBlock(c.LoadBalancerCIDR); err != nil {
			return fmt.Errorf("config: %w", err)
		}
	}
	if c.MaxVolumes < 0 {
		return fmt.Errorf("config: max volumes %d must not be negative", c.MaxVolumes)
	}
	return nil
}
