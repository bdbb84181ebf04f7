package apiserver

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
)

// Config is what `kubelab apiserver` and `kubelab up` set.
type Config struct {
	// DataDir holds the PKI (DataDir/pki) and the admin kubeconfig (DataDir/kubeconfig).
	DataDir string
	// BindAddress and Port: where HTTPS is served; Port 0 picks a free port.
	BindAddress string
	Port        int
	// EtcdServers are the etcd client URLs; EtcdPrefix the key prefix ("/registry").
	EtcdServers []string
	EtcdPrefix  string
	// ServiceCIDR is the range ClusterIPs come from (10.96.0.0/12).
	ServiceCIDR string
	// KubeconfigPath is where the admin kubeconfig is written; DataDir/kubeconfig when empty.
	KubeconfigPath string
}

func (c *Config) setDefaults() {
	if c.BindAddress == "" {
		c.BindAddress = "127.0.0.1"
	}
	if c.EtcdPrefix == "" {
		c.EtcdPrefix = "/registry"
	}
	if c.ServiceCIDR == "" {
		c.ServiceCIDR = "10.96.0.0/12"
	}
	if c.KubeconfigPath == "" && c.DataDir != "" {
		c.KubeconfigPath = filepath.Join(c.DataDir, "kubeconfig")
	}
}

func (c *Config) validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("data dir is required"))
	}
	if ip := net.ParseIP(c.BindAddress); ip == nil {
		errs = append(errs, fmt.Errorf("bind address %q is not an IP address", c.BindAddress))
	}
	if c.Port < 0 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("port %d is out of range", c.Port))
	}
	if len(c.EtcdServers) == 0 {
		errs = append(errs, errors.New("at least one etcd server is required"))
	}
	for _, s := range c.EtcdServers {
		if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
			errs = append(errs, fmt.Errorf("etcd server %q must be a URL like http://127.0.0.1:2379", s))
		}
	}
	if !strings.HasPrefix(c.EtcdPrefix, "/") {
		errs = append(errs, fmt.Errorf("etcd prefix %q must start with /", c.EtcdPrefix))
	}
	if _, n, err := net.ParseCIDR(c.ServiceCIDR); err != nil || n.IP.To4() == nil {
		errs = append(errs, fmt.Errorf("service CIDR %q is not an IPv4 CIDR", c.ServiceCIDR))
	}
	return errors.Join(errs...)
}
