package apiserver

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
)

// TestEnsureFrontProxy: the front-proxy CA and the client certificate it signs
// (front-proxy-client, client usage) are made at kubeadm's paths, apart from the
// cluster CA; a second call keeps them; a client certificate another CA signed is made
// again.
func TestEnsureFrontProxy(t *testing.T) {
	p := PKI{Dir: filepath.Join(t.TempDir(), "pki")}
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := p.ensureFrontProxy(); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"front-proxy-ca.crt", "front-proxy-ca.key", "front-proxy-client.crt", "front-proxy-client.key"} {
		if _, err := os.Stat(filepath.Join(p.Dir, rel)); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
	}
	verify := func() {
		t.Helper()
		ca, _, err := loadCAFiles(p.FrontProxyCACert(), p.FrontProxyCAKey())
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AddCert(ca)
		leaf := loadLeaf(t, p.FrontProxyClientCert(), p.FrontProxyClientKey())
		if leaf.Subject.CommonName != "front-proxy-client" {
			t.Errorf("CN %q, want front-proxy-client", leaf.Subject.CommonName)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("the client certificate is not a client certificate of the front-proxy CA: %v", err)
		}
	}
	verify()
	if _, err := os.Stat(p.CACert()); err == nil {
		t.Error("the front proxy's PKI made the cluster CA; it has a CA of its own")
	}
	before, _ := os.ReadFile(p.FrontProxyClientCert())
	if err := p.ensureFrontProxy(); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(p.FrontProxyClientCert()); !bytes.Equal(before, after) {
		t.Error("a second call replaced a fit client certificate")
	}
	// A client certificate of another CA is replaced by one of the front proxy's.
	other := PKI{Dir: filepath.Join(t.TempDir(), "other")}
	if err := os.MkdirAll(other.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := other.ensureFrontProxy(); err != nil {
		t.Fatal(err)
	}
	for _, f := range [][2]string{{other.FrontProxyClientCert(), p.FrontProxyClientCert()}, {other.FrontProxyClientKey(), p.FrontProxyClientKey()}} {
		b, _ := os.ReadFile(f[0])
		if err := os.WriteFile(f[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.ensureFrontProxy(); err != nil {
		t.Fatal(err)
	}
	verify()
}
