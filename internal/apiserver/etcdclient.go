package apiserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// validateEtcdTLS checks the etcd client TLS files: all three or none, and all three for
// https servers.
func (c *Config) validateEtcdTLS() []error {
	set := 0
	for _, f := range []string{c.EtcdCAFile, c.EtcdCertFile, c.EtcdKeyFile} {
		if f != "" {
			set++
		}
	}
	if set != 0 && set != 3 {
		return []error{fmt.Errorf("etcd TLS needs the CA, certificate and key files together (got CA %q, certificate %q, key %q)",
			c.EtcdCAFile, c.EtcdCertFile, c.EtcdKeyFile)}
	}
	if set == 0 {
		for _, s := range c.EtcdServers {
			if strings.HasPrefix(s, "https://") {
				return []error{fmt.Errorf("etcd server %q is https: it needs the etcd CA, client certificate and key files", s)}
			}
		}
	}
	return nil
}

// etcdTLS is the client TLS configuration toward etcd; nil without TLS files.
func (c *Config) etcdTLS() (*tls.Config, error) {
	if c.EtcdCAFile == "" {
		return nil, nil
	}
	tc, err := transport.TLSInfo{CertFile: c.EtcdCertFile, KeyFile: c.EtcdKeyFile, TrustedCAFile: c.EtcdCAFile}.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("etcd client TLS: %w", err)
	}
	return tc, nil
}

// newEtcdClient is the API server's own etcd client (the Service allocations), with the
// same TLS as its storage.
func newEtcdClient(ctx context.Context, cfg *Config) (*clientv3.Client, error) {
	tc, err := cfg.etcdTLS()
	if err != nil {
		return nil, err
	}
	return clientv3.New(clientv3.Config{Endpoints: cfg.EtcdServers, TLS: tc, DialTimeout: 10 * time.Second, Context: ctx})
}
