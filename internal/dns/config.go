package dns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"

	mdns "github.com/miekg/dns"
)

// Defaults of Config.
const (
	DefaultDomain = "cluster.local"
	DefaultTTL    = 5
	// maxTTL bounds Config.TTL: records of a cluster change, and clients must see it.
	maxTTL = 3600
)

// Config describes the zone the server is authoritative for.
type Config struct {
	// Domain is the cluster domain ("cluster.local" when empty), with or without the
	// trailing dot; matched case-insensitively.
	Domain string
	// TTL is the time to live of every record and the negative-caching time of the SOA
	// (5 seconds when zero, at most 3600).
	TTL uint32
	// Hosts are names outside the zones that the server answers itself, as a hosts file
	// does (name, any case, with or without the final dot → addresses): A and AAAA with
	// the addresses, NODATA for other types; they are never forwarded. kubelab's are the
	// VPC's own names, the EC2 endpoint's.
	Hosts map[string][]netip.Addr
	// Upstreams are the nameservers that names outside the zones (and reverse names of
	// addresses outside the cluster) are forwarded to, tried in order: the machine's
	// resolver. None: such names are REFUSED.
	Upstreams []netip.AddrPort
	// Dial connects to an upstream over "udp" or "tcp", as net.Dialer.DialContext does
	// (which it is when nil); a connection over udp must be a net.PacketConn.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) validate() error {
	var errs []error
	d := canonicalDomain(c.Domain)
	switch {
	case c.Domain == "":
	case d == ".":
		errs = append(errs, errors.New("domain must not be the root"))
	case !validDomain(d):
		errs = append(errs, fmt.Errorf("domain %q is not a domain name", c.Domain))
	case reverseZone(d) != "":
		errs = append(errs, fmt.Errorf("domain %q is in a reverse zone", c.Domain))
	}
	if c.TTL > maxTTL {
		errs = append(errs, fmt.Errorf("ttl %d is above %d", c.TTL, maxTTL))
	}
	domain := d
	if c.Domain == "" {
		domain = canonicalDomain(DefaultDomain)
	}
	for name, addrs := range c.Hosts {
		switch fq := canonicalDomain(name); {
		case fq == "." || !validDomain(fq):
			errs = append(errs, fmt.Errorf("host %q is not a domain name", name))
		case mdns.IsSubDomain(domain, fq) || reverseZone(fq) != "":
			errs = append(errs, fmt.Errorf("host %q is in the server's zones", name))
		}
		for _, a := range addrs {
			if !a.IsValid() {
				errs = append(errs, fmt.Errorf("host %q: an invalid address", name))
			}
		}
	}
	for _, u := range c.Upstreams {
		if !u.IsValid() || u.Port() == 0 {
			errs = append(errs, fmt.Errorf("upstream %q is not an address with a port", u))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dns config: %w", err)
	}
	return nil
}

func (c *Config) defaults() {
	if c.Domain == "" {
		c.Domain = DefaultDomain
	}
	c.Domain = canonicalDomain(c.Domain)
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.Dial == nil {
		c.Dial = (&net.Dialer{}).DialContext
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// canonicalDomain is d lower-cased and fully qualified.
func canonicalDomain(d string) string {
	return mdns.Fqdn(strings.ToLower(d))
}

// validDomain tells whether the fully qualified d is a host-style domain name: labels of
// letters, digits and hyphens, not starting or ending with a hyphen.
func validDomain(d string) bool {
	if _, ok := mdns.IsDomainName(d); !ok {
		return false
	}
	for _, l := range mdns.SplitDomainName(d) {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}
