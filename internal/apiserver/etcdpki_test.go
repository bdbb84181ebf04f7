package apiserver

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func loadLeaf(t *testing.T, certFile, keyFile string) *x509.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return pair.Leaf
}

// TestEnsureEtcd: the etcd certificates are made at kubeadm's paths, signed by etcd's
// own CA, with the names and usages etcd and its clients need; a second call keeps them;
// one that is missing or signed by another CA is made again.
func TestEnsureEtcd(t *testing.T) {
	p := PKI{Dir: filepath.Join(t.TempDir(), "pki")}
	if err := p.EnsureEtcd("127.0.0.1", "10.0.0.5", "etcd.local"); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"etcd/ca.crt", "etcd/ca.key", "etcd/server.crt", "etcd/server.key", "etcd/peer.crt", "etcd/peer.key",
		"etcd/healthcheck-client.crt", "etcd/healthcheck-client.key", "apiserver-etcd-client.crt", "apiserver-etcd-client.key"} {
		fi, err := os.Stat(filepath.Join(p.Dir, rel))
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if strings.HasSuffix(rel, ".key") && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", rel, fi.Mode().Perm())
		}
	}
	if fi, err := os.Stat(filepath.Join(p.Dir, "etcd")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("pki/etcd: %v, want mode 0700", fi.Mode())
	}
	ca, _, err := loadCAFiles(p.EtcdCACert(), p.EtcdCAKey())
	if err != nil {
		t.Fatal(err)
	}
	clusterCA, _ := os.ReadFile(p.CACert())
	if clusterCA != nil {
		t.Error("EnsureEtcd made the cluster CA; etcd has a CA of its own")
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, c := range []struct {
		cert, key, cn string
		usages        []x509.ExtKeyUsage
		names         bool
	}{
		{p.EtcdServerCert(), p.EtcdServerKey(), "kube-etcd", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, true},
		{p.EtcdPeerCert(), p.EtcdPeerKey(), "kube-etcd-peer", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, true},
		{p.EtcdHealthcheckClientCert(), p.EtcdHealthcheckClientKey(), "kube-etcd-healthcheck-client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, false},
		{p.APIServerEtcdClientCert(), p.APIServerEtcdClientKey(), "kube-apiserver-etcd-client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, false},
	} {
		leaf := loadLeaf(t, c.cert, c.key)
		if leaf.Subject.CommonName != c.cn {
			t.Errorf("%s: CN %q, want %q", c.cert, leaf.Subject.CommonName, c.cn)
		}
		for _, u := range c.usages {
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{u}}); err != nil {
				t.Errorf("%s: not valid for usage %v under etcd's CA: %v", c.cert, u, err)
			}
		}
		if !c.names {
			continue
		}
		for _, host := range []string{"localhost", "127.0.0.1", "10.0.0.5", "etcd.local"} {
			if err := leaf.VerifyHostname(host); err != nil {
				t.Errorf("%s does not name %s: %v", c.cert, host, err)
			}
		}
		if slices.ContainsFunc(leaf.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.ParseIP("10.0.0.6")) }) {
			t.Errorf("%s names an address it was not given", c.cert)
		}
	}

	// Kept across restarts.
	before, _ := os.ReadFile(p.APIServerEtcdClientCert())
	serverBefore, _ := os.ReadFile(p.EtcdServerCert())
	if err := p.EnsureEtcd("127.0.0.1", "10.0.0.5", "etcd.local"); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(p.APIServerEtcdClientCert())
	serverAfter, _ := os.ReadFile(p.EtcdServerCert())
	if !bytes.Equal(before, after) || !bytes.Equal(serverBefore, serverAfter) {
		t.Error("a second EnsureEtcd replaced certificates that fit")
	}

	// A missing certificate is made again; one of another CA is replaced.
	if err := os.Remove(p.EtcdPeerCert()); err != nil {
		t.Fatal(err)
	}
	other := PKI{Dir: filepath.Join(t.TempDir(), "pki")}
	if err := other.EnsureEtcd(); err != nil {
		t.Fatal(err)
	}
	foreign, _ := os.ReadFile(other.APIServerEtcdClientCert())
	foreignKey, _ := os.ReadFile(other.APIServerEtcdClientKey())
	if err := os.WriteFile(p.APIServerEtcdClientCert(), foreign, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.APIServerEtcdClientKey(), foreignKey, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.EnsureEtcd("127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]string{{p.EtcdPeerCert(), p.EtcdPeerKey()}, {p.APIServerEtcdClientCert(), p.APIServerEtcdClientKey()}} {
		if err := loadLeaf(t, c[0], c[1]).CheckSignatureFrom(ca); err != nil {
			t.Errorf("%s was not made again under etcd's CA: %v", c[0], err)
		}
	}
	// A server certificate lacking a newly asked-for address is replaced.
	if err := p.EnsureEtcd("127.0.0.1", "10.0.0.7"); err != nil {
		t.Fatal(err)
	}
	if err := loadLeaf(t, p.EtcdServerCert(), p.EtcdServerKey()).VerifyHostname("10.0.0.7"); err != nil {
		t.Errorf("server certificate not renewed for a new address: %v", err)
	}
}

func TestConfigEtcdTLS(t *testing.T) {
	for _, tc := range []struct {
		name        string
		servers     []string
		ca, crt, ky string
		want        string // "" when valid
	}{
		{"http without TLS", []string{"http://127.0.0.1:2379"}, "", "", "", ""},
		{"https with TLS", []string{"https://127.0.0.1:2379"}, "ca.crt", "c.crt", "c.key", ""},
		{"https without TLS", []string{"https://127.0.0.1:2379"}, "", "", "", "needs the etcd CA, client certificate and key"},
		{"only a CA", []string{"https://127.0.0.1:2379"}, "ca.crt", "", "", "together"},
		{"no key", []string{"https://127.0.0.1:2379"}, "ca.crt", "c.crt", "", "together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{DataDir: "/tmp/x", EtcdServers: tc.servers, EtcdCAFile: tc.ca, EtcdCertFile: tc.crt, EtcdKeyFile: tc.ky}
			c.setDefaults()
			err := c.validate()
			if tc.want == "" && err != nil {
				t.Fatalf("valid config refused: %v", err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}
