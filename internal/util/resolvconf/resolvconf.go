package resolvconf

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
)

// Path is the machine's resolver configuration.
const Path = "/etc/resolv.conf"

// Port is the port of a nameserver line's address.
const Port = 53

// Config is what a resolv.conf says.
type Config struct {
	// Nameservers are the nameserver lines' addresses, in order, as written.
	Nameservers []string
	// Searches is the last search (or domain) line's list, without trailing dots,
	// duplicates or ".".
	Searches []string
	// Options are the options lines' options ("name" or "name:value"), one per name: a
	// later one replaces an earlier one of the same name in place.
	Options []string
}

// Read reads the resolver configuration file at path.
func Read(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cfg, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// Parse parses resolv.conf: every nameserver line, the last search (or domain) line,
// options merged by name (the last value wins); comments start with # or ;. Lines of other
// keywords (sortlist) are ignored.
func Parse(r io.Reader) (*Config, error) {
	cfg := &Config{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "nameserver":
			if len(fields) > 1 {
				cfg.Nameservers = append(cfg.Nameservers, fields[1])
			}
		case "search", "domain":
			cfg.Searches = nil
			for _, s := range fields[1:] {
				if s = strings.TrimSuffix(s, "."); s != "" && !slices.Contains(cfg.Searches, s) {
					cfg.Searches = append(cfg.Searches, s)
				}
			}
		case "options":
			for _, o := range fields[1:] {
				cfg.Options = SetOption(cfg.Options, o)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// SetOption replaces the option of the same name as opt ("name" or "name:value") in
// options, or appends opt.
func SetOption(options []string, opt string) []string {
	name, _, _ := strings.Cut(opt, ":")
	for i, o := range options {
		if n, _, _ := strings.Cut(o, ":"); n == name {
			options[i] = opt
			return options
		}
	}
	return append(options, opt)
}

// NameserverAddrs are the nameservers' addresses with port 53, in order and without
// duplicates; lines that are not an IP address are skipped.
func (c *Config) NameserverAddrs() []netip.AddrPort {
	var out []netip.AddrPort
	for _, s := range c.Nameservers {
		a, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		if ap := netip.AddrPortFrom(a.Unmap(), Port); !slices.Contains(out, ap) {
			out = append(out, ap)
		}
	}
	return out
}
