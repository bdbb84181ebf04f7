package apiserver

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// The etcd part of the PKI, at the paths kubeadm gives it: a CA of etcd's own
// (pki/etcd/ca.crt), whose certificates alone open etcd, and what it signs.

// EtcdCACert and EtcdCAKey are etcd's CA: etcd serves only clients and peers whose
// certificate it signed.
func (p PKI) EtcdCACert() string { return filepath.Join(p.Dir, "etcd", "ca.crt") }
func (p PKI) EtcdCAKey() string  { return filepath.Join(p.Dir, "etcd", "ca.key") }

// EtcdServerCert and EtcdServerKey are etcd's certificate on its client URL (server and
// client usage: etcd's gRPC gateway dials etcd with it).
func (p PKI) EtcdServerCert() string { return filepath.Join(p.Dir, "etcd", "server.crt") }
func (p PKI) EtcdServerKey() string  { return filepath.Join(p.Dir, "etcd", "server.key") }

// EtcdPeerCert and EtcdPeerKey are etcd's certificate on its peer URL.
func (p PKI) EtcdPeerCert() string { return filepath.Join(p.Dir, "etcd", "peer.crt") }
func (p PKI) EtcdPeerKey() string  { return filepath.Join(p.Dir, "etcd", "peer.key") }

// EtcdHealthcheckClientCert and EtcdHealthcheckClientKey are a client certificate for
// probing etcd (etcdctl endpoint health) without the API server's identity.
func (p PKI) EtcdHealthcheckClientCert() string {
	return filepath.Join(p.Dir, "etcd", "healthcheck-client.crt")
}
func (p PKI) EtcdHealthcheckClientKey() string {
	return filepath.Join(p.Dir, "etcd", "healthcheck-client.key")
}

// APIServerEtcdClientCert and APIServerEtcdClientKey are the API server's client
// certificate toward etcd (user APIServerEtcdClientUser).
func (p PKI) APIServerEtcdClientCert() string {
	return filepath.Join(p.Dir, "apiserver-etcd-client.crt")
}
func (p PKI) APIServerEtcdClientKey() string {
	return filepath.Join(p.Dir, "apiserver-etcd-client.key")
}

// The common names of etcd's certificates.
const (
	APIServerEtcdClientUser   = "kube-apiserver-etcd-client"
	EtcdHealthcheckClientUser = "kube-etcd-healthcheck-client"
	etcdServerName            = "kube-etcd"
	etcdPeerName              = "kube-etcd-peer"
)

// EnsureEtcd makes whatever of etcd's PKI is missing or no longer fit, before the
// embedded etcd starts (it starts before the API server): etcd's CA, etcd's server and
// peer certificates naming localhost, 127.0.0.1 and hosts (IP addresses or DNS names:
// the listen address), the health-check client certificate and the API server's client
// certificate. Files that fit are kept, so restarts reuse them. A CA that cannot be read
// or expires within 30 days is replaced, and with it every certificate; a certificate
// not signed by the CA, expiring within 30 days or (server, peer) lacking a name is
// replaced.
func (p PKI) EnsureEtcd(hosts ...string) error {
	if err := os.MkdirAll(filepath.Join(p.Dir, "etcd"), 0o700); err != nil {
		return fmt.Errorf("create etcd pki dir: %w", err)
	}
	ca, caKey, err := loadCAFiles(p.EtcdCACert(), p.EtcdCAKey())
	if err != nil || time.Until(ca.NotAfter) < 30*24*time.Hour {
		if err := createCA(p.EtcdCACert(), p.EtcdCAKey(), "etcd-ca"); err != nil {
			return err
		}
		if ca, caKey, err = loadCAFiles(p.EtcdCACert(), p.EtcdCAKey()); err != nil {
			return fmt.Errorf("etcd CA: %w", err)
		}
	}
	dnsNames, ips := etcdNames(hosts)
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	for _, c := range []struct {
		cert, key, cn string
	}{
		{p.EtcdServerCert(), p.EtcdServerKey(), etcdServerName},
		{p.EtcdPeerCert(), p.EtcdPeerKey(), etcdPeerName},
	} {
		if servingCertCovers(c.cert, c.key, ca, dnsNames, ips) {
			continue
		}
		tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: c.cn}, ExtKeyUsage: both, DNSNames: dnsNames, IPAddresses: ips}
		if err := issue(tmpl, ca, caKey, c.cert, c.key); err != nil {
			return err
		}
	}
	for _, c := range []struct {
		cert, key, cn string
	}{
		{p.EtcdHealthcheckClientCert(), p.EtcdHealthcheckClientKey(), EtcdHealthcheckClientUser},
		{p.APIServerEtcdClientCert(), p.APIServerEtcdClientKey(), APIServerEtcdClientUser},
	} {
		if clientCertCurrent(c.cert, c.key, ca, c.cn) {
			continue
		}
		tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: c.cn}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		if err := issue(tmpl, ca, caKey, c.cert, c.key); err != nil {
			return err
		}
	}
	return nil
}

// etcdNames are the names etcd's server and peer certificates carry: localhost,
// 127.0.0.1 and hosts.
func etcdNames(hosts []string) ([]string, []net.IP) {
	dnsNames := []string{"localhost"}
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !containsIP(ips, ip) {
				ips = append(ips, ip)
			}
		} else if h != "" && !slices.Contains(dnsNames, h) {
			dnsNames = append(dnsNames, h)
		}
	}
	return dnsNames, ips
}

// clientCertCurrent says whether certFile and keyFile are a pair, signed by ca, for
// common name cn, and valid for 30 more days.
func clientCertCurrent(certFile, keyFile string, ca *x509.Certificate, cn string) bool {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil || pair.Leaf == nil {
		return false
	}
	cert := pair.Leaf
	return cert.Subject.CommonName == cn && cert.CheckSignatureFrom(ca) == nil && time.Until(cert.NotAfter) >= 30*24*time.Hour
}
