package certificates

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
)

func TestKeyUsages(t *testing.T) {
	for _, tc := range []struct {
		name    string
		usages  []certificatesv1.KeyUsage
		ku      x509.KeyUsage
		ext     []x509.ExtKeyUsage
		wantErr string
	}{
		{"none", nil, 0, nil, ""},
		{"serving", servingUsages, x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, ""},
		{"signing is digital signature", []certificatesv1.KeyUsage{certificatesv1.UsageSigning}, x509.KeyUsageDigitalSignature, nil, ""},
		{"sorted and deduplicated", []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth, certificatesv1.UsageServerAuth, certificatesv1.UsageClientAuth, certificatesv1.UsageSMIME, certificatesv1.UsageEmailProtection},
			0, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageEmailProtection}, ""},
		{"unknown", []certificatesv1.KeyUsage{"server auth", "teleport", "fly"}, 0, nil, `unrecognized usage values: ["teleport" "fly"]`},
	} {
		ku, ext, err := keyUsages(tc.usages)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || ku != tc.ku || !slices.Equal(ext, tc.ext) {
			t.Errorf("%s: %v %v %v; want %v %v", tc.name, ku, ext, err, tc.ku, tc.ext)
		}
	}
}

func TestSigningPolicyApply(t *testing.T) {
	caEnd := t0.Add(365 * 24 * time.Hour)
	for _, tc := range []struct {
		name          string
		ttl           time.Duration
		now, caEnd    time.Time
		before, after time.Time
		wantErr       bool
	}{
		{"long lived: both ends backdated", 24 * time.Hour, t0, caEnd, t0.Add(-5 * time.Minute), t0.Add(24*time.Hour - 5*time.Minute), false},
		{"short lived: end not backdated", time.Hour, t0, caEnd, t0.Add(-5 * time.Minute), t0.Add(time.Hour), false},
		{"capped at the CA's end", 2 * 365 * 24 * time.Hour, t0, caEnd, t0.Add(-5 * time.Minute), caEnd, false},
		{"CA expired", time.Hour, caEnd.Add(time.Minute), caEnd, time.Time{}, time.Time{}, true},
		{"CA expiring within the backdate", time.Hour, caEnd.Add(time.Minute), caEnd.Add(2 * time.Minute), caEnd.Add(-4 * time.Minute), caEnd.Add(2 * time.Minute), false},
	} {
		tmpl := &x509.Certificate{IsCA: true, ExtraExtensions: []pkix.Extension{{Id: []int{1, 2, 3}}}}
		err := signingPolicy{TTL: tc.ttl, Usages: clientUsages, Backdate: backdate, Short: shortLived, Now: tc.now}.apply(tmpl, tc.caEnd)
		if tc.wantErr {
			if err == nil {
				t.Errorf("%s: no error", tc.name)
			}
			continue
		}
		if err != nil || !tmpl.NotBefore.Equal(tc.before) || !tmpl.NotAfter.Equal(tc.after) {
			t.Errorf("%s: %v – %v, %v; want %v – %v", tc.name, tmpl.NotBefore, tmpl.NotAfter, err, tc.before, tc.after)
		}
		if tmpl.IsCA || !tmpl.BasicConstraintsValid || tmpl.ExtraExtensions != nil ||
			tmpl.KeyUsage != x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment || !slices.Equal(tmpl.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
			t.Errorf("%s: template %+v", tc.name, tmpl)
		}
	}
}

func TestLoadAuthority(t *testing.T) {
	ca := newTestCA(t, t0.Add(10*365*24*time.Hour))
	if _, err := loadAuthority(ca.certPEM, ca.keyPEM); err != nil {
		t.Fatal(err)
	}
	// The same key as PKCS #8.
	block, _ := pem.Decode(ca.keyPEM)
	key, _ := x509.ParseECPrivateKey(block.Bytes)
	p8, _ := x509.MarshalPKCS8PrivateKey(key)
	if _, err := loadAuthority(ca.certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8})); err != nil {
		t.Errorf("a PKCS #8 key: %v", err)
	}
	other := newTestCA(t, t0.Add(time.Hour))
	if _, err := loadAuthority(ca.certPEM, other.keyPEM); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("a key of another CA: %v", err)
	}
	if _, err := loadAuthority([]byte("junk"), ca.keyPEM); err == nil {
		t.Error("a certificate that is not PEM is accepted")
	}
}

// A signed certificate keeps the request's subject, SANs and key, and nothing else of it.
func TestAuthoritySign(t *testing.T) {
	ca := newTestCA(t, t0.Add(10*365*24*time.Hour))
	a, err := loadAuthority(ca.certPEM, ca.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: nodeSubject("n1"), DNSNames: []string{"n1"}, IPAddresses: []net.IP{net.ParseIP("10.0.0.1")},
		ExtraExtensions: []pkix.Extension{{Id: []int{1, 2, 3, 4}, Value: []byte{5, 0}}},
	}, key)
	cr, _ := x509.ParseCertificateRequest(der)
	out, err := a.sign(cr, signingPolicy{TTL: time.Hour, Usages: servingUsages, Backdate: backdate, Short: shortLived, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	cert := verifyIssued(t, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: out}), ca.cert, t0, x509.ExtKeyUsageServerAuth)
	if cert.Subject.CommonName != "system:node:n1" || !slices.Equal(cert.Subject.Organization, []string{"system:nodes"}) ||
		!slices.Equal(cert.DNSNames, []string{"n1"}) || len(cert.IPAddresses) != 1 || !key.PublicKey.Equal(cert.PublicKey) {
		t.Errorf("certificate %+v", cert)
	}
	for _, e := range cert.Extensions {
		if e.Id.Equal([]int{1, 2, 3, 4}) {
			t.Error("the request's extension was copied")
		}
	}
	// A request whose signature does not verify is not signed.
	cr.Signature[len(cr.Signature)-1] ^= 0xff
	if _, err := a.sign(cr, signingPolicy{TTL: time.Hour, Now: t0}); err == nil {
		t.Error("a request with a bad signature was signed")
	}
}
