package apiserver

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"path/filepath"
	"time"
)

// The front-proxy part of the PKI, at the paths kubeadm gives it: a CA of its own
// (front-proxy-ca.crt), which aggregated API servers trust for the identity headers
// of requests the API server passes on to them (requestheader-client-ca-file of the
// kube-system/extension-apiserver-authentication ConfigMap), and the API server's
// client certificate toward them, signed by it.

// FrontProxyCACert and FrontProxyCAKey are the front proxy's CA.
func (p PKI) FrontProxyCACert() string { return filepath.Join(p.Dir, "front-proxy-ca.crt") }
func (p PKI) FrontProxyCAKey() string  { return filepath.Join(p.Dir, "front-proxy-ca.key") }

// FrontProxyClientCert and FrontProxyClientKey are the API server's client certificate
// toward aggregated API servers (common name FrontProxyClientName).
func (p PKI) FrontProxyClientCert() string { return filepath.Join(p.Dir, "front-proxy-client.crt") }
func (p PKI) FrontProxyClientKey() string  { return filepath.Join(p.Dir, "front-proxy-client.key") }

// FrontProxyClientName is the common name of the front-proxy client certificate, the one
// name requestheader-allowed-names allows.
const FrontProxyClientName = "front-proxy-client"

// ensureFrontProxy makes whatever of the front-proxy PKI is missing or no longer fit:
// a CA that cannot be read or expires within 30 days is replaced, and a client
// certificate not signed by it, of another name or expiring within 30 days.
func (p PKI) ensureFrontProxy() error {
	ca, caKey, err := loadCAFiles(p.FrontProxyCACert(), p.FrontProxyCAKey())
	if err != nil || time.Until(ca.NotAfter) < 30*24*time.Hour {
		if err := createCA(p.FrontProxyCACert(), p.FrontProxyCAKey(), "front-proxy-ca"); err != nil {
			return err
		}
		if ca, caKey, err = loadCAFiles(p.FrontProxyCACert(), p.FrontProxyCAKey()); err != nil {
			return fmt.Errorf("front-proxy CA: %w", err)
		}
	}
	if clientCertCurrent(p.FrontProxyClientCert(), p.FrontProxyClientKey(), ca, FrontProxyClientName) {
		return nil
	}
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: FrontProxyClientName}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	return issue(tmpl, ca, caKey, p.FrontProxyClientCert(), p.FrontProxyClientKey())
}
