package certificates

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testCA is a self-signed ECDSA CA valid for ten years from t0 minus an hour.
type testCA struct {
	cert            *x509.Certificate
	certPEM, keyPEM []byte
}

func newTestCA(t testing.TB, notAfter time.Time) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: t0.Add(-time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	kb, _ := x509.MarshalECPrivateKey(key)
	return testCA{cert: cert,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})}
}

// csrPEM is a PEM certificate request for tmpl with a fresh ECDSA key.
func csrPEM(t testing.TB, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func parsedCSR(t testing.TB, tmpl *x509.CertificateRequest) *x509.CertificateRequest {
	t.Helper()
	cr, err := parseCSR(csrPEM(t, tmpl))
	if err != nil {
		t.Fatal(err)
	}
	return cr
}

func nodeSubject(node string) pkix.Name {
	return pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}
}

var (
	servingUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}
	clientUsages  = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}
)

// newCSR is a CertificateSigningRequest named name for signer with request tmpl.
func newCSR(t testing.TB, name, signer string, tmpl *x509.CertificateRequest, usages ...certificatesv1.KeyUsage) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0)},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: csrPEM(t, tmpl), SignerName: signer, Usages: usages,
			Username: "someone", Groups: []string{"system:authenticated"}},
	}
}

func withCondition(csr *certificatesv1.CertificateSigningRequest, typ certificatesv1.RequestConditionType, at time.Time) *certificatesv1.CertificateSigningRequest {
	csr = csr.DeepCopy()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: typ, Status: corev1.ConditionTrue, Reason: "Test", LastUpdateTime: metav1.NewTime(at)})
	return csr
}

// verifyIssued parses the PEM certificate and checks that it chains to ca for usages at
// the time at.
func verifyIssued(t testing.TB, certPEM []byte, ca *x509.Certificate, at time.Time, usages ...x509.ExtKeyUsage) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("status.certificate is not a PEM certificate: %q", certPEM)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: at, KeyUsages: usages}); err != nil {
		t.Fatalf("the certificate does not chain to the CA: %v", err)
	}
	if cert.IsCA {
		t.Error("a signed certificate is a CA")
	}
	return cert
}
