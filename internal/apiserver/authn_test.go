package apiserver_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

// TestClientCertificates: the server caches verified client certificates, and must
// still refuse (401) a certificate once it expires, one that had expired before it was
// shown, and one of a CA it does not trust, while a valid one passes on every request.
func TestClientCertificates(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	pki := filepath.Join(s.DataDir, "pki")
	clusterCA, err := tls.LoadX509KeyPair(filepath.Join(pki, "ca.crt"), filepath.Join(pki, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	foreignCA := selfSignedCA(t)

	// status GETs /api with cert, each time on a fresh connection.
	status := func(cert tls.Certificate) int {
		t.Helper()
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get(s.URL + "/api")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	now := time.Now()
	valid := clientCert(t, clusterCA, "valid-user", now.Add(-time.Minute), now.Add(time.Hour))
	shortLived := clientCert(t, clusterCA, "short-lived-user", now.Add(-time.Minute), now.Add(3*time.Second))
	expired := clientCert(t, clusterCA, "expired-user", now.Add(-time.Hour), now.Add(-time.Minute))
	foreign := clientCert(t, foreignCA, "foreign-user", now.Add(-time.Minute), now.Add(time.Hour))

	for i := range 3 {
		if got := status(valid); got != http.StatusOK {
			t.Fatalf("valid certificate, request %d: status %d, want 200", i, got)
		}
		if got := status(shortLived); got != http.StatusOK {
			t.Fatalf("short-lived certificate before it expires, request %d: status %d, want 200", i, got)
		}
	}
	if got := status(expired); got != http.StatusUnauthorized {
		t.Fatalf("expired certificate: status %d, want 401", got)
	}
	if got := status(foreign); got != http.StatusUnauthorized {
		t.Fatalf("certificate of a foreign CA: status %d, want 401", got)
	}
	leaf, err := x509.ParseCertificate(shortLived.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(leaf.NotAfter) + 1500*time.Millisecond)
	if got := status(shortLived); got != http.StatusUnauthorized {
		t.Fatalf("short-lived certificate after it expired (it was verified and cached before): status %d, want 401", got)
	}
	if got := status(valid); got != http.StatusOK {
		t.Fatalf("valid certificate at the end: status %d, want 200", got)
	}
}

func selfSignedCA(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "foreign-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// clientCert issues a client certificate for user, signed by ca, valid from notBefore
// to notAfter.
func clientCert(t *testing.T, ca tls.Certificate, user string, notBefore, notAfter time.Time) tls.Certificate {
	t.Helper()
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: user, Organization: []string{"system:masters"}},
		NotBefore: notBefore, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, ca.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
