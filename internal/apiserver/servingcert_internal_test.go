package apiserver

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// IssueServingCert names the IP addresses among its names as addresses, the rest as DNS
// names, and makes the certificate again when the names change.
func TestIssueServingCertNamesAddresses(t *testing.T) {
	p := PKI{Dir: filepath.Join(t.TempDir(), "pki")}
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := p.ensure(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(p.Dir, "webhook")
	check := func(names []string, wantDNS []string, wantIPs []string) {
		t.Helper()
		cert, key, err := p.IssueServingCert(dir, "webhook", names)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		var ips []string
		for _, ip := range pair.Leaf.IPAddresses {
			ips = append(ips, ip.String())
		}
		if !slices.Equal(pair.Leaf.DNSNames, wantDNS) || !slices.Equal(ips, wantIPs) {
			t.Errorf("names %q: certificate for DNS %q and IPs %q, want %q and %q", names, pair.Leaf.DNSNames, ips, wantDNS, wantIPs)
		}
	}
	check([]string{"127.0.0.1", "localhost"}, []string{"localhost"}, []string{"127.0.0.1"})
	check([]string{"sts.us-east-1.amazonaws.com", "172.31.0.3"}, []string{"sts.us-east-1.amazonaws.com"}, []string{"172.31.0.3"})
}
