package apiserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net/http"
	"sync"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
)

// fakeCertAuthn stands in for the x509 authenticator: it answers with the user named by
// the leaf's common name, or err, and counts its calls.
type fakeCertAuthn struct {
	calls int
	err   error
	mu    sync.Mutex
}

func (f *fakeCertAuthn) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, false, f.err
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: req.TLS.PeerCertificates[0].Subject.CommonName}}, true, nil
}

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T, notBefore, notAfter time.Time) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: notBefore, NotAfter: notAfter, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return testCA{cert, key}
}

func (ca testCA) issue(t *testing.T, cn string, notBefore, notAfter time.Time) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: notBefore, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func requestWith(certs ...*x509.Certificate) *http.Request {
	req, _ := http.NewRequest(http.MethodGet, "https://127.0.0.1/api", nil)
	req.TLS = &tls.ConnectionState{PeerCertificates: certs}
	return req
}

func TestCertCacheVerifiesOncePerCertificateUntilItExpires(t *testing.T) {
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ca := newTestCA(t, base.Add(-time.Hour), base.Add(24*time.Hour))
	alice := ca.issue(t, "alice", base.Add(-time.Minute), base.Add(time.Hour))
	bob := ca.issue(t, "bob", base.Add(-time.Minute), base.Add(time.Hour))
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	now := base
	inner := &fakeCertAuthn{}
	c := newCertCache(inner, x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, func() time.Time { return now })

	authn := func(cert *x509.Certificate) (string, error) {
		t.Helper()
		resp, ok, err := c.AuthenticateRequest(requestWith(cert))
		if err != nil {
			return "", err
		}
		if !ok {
			t.Fatal("not authenticated and no error")
		}
		return resp.User.GetName(), nil
	}
	for i := range 3 {
		if name, err := authn(alice); err != nil || name != "alice" {
			t.Fatalf("request %d: got %q, %v; want alice", i, name, err)
		}
	}
	if inner.calls != 1 {
		t.Fatalf("3 requests with one certificate verified it %d times, want once", inner.calls)
	}
	if name, err := authn(bob); err != nil || name != "bob" {
		t.Fatalf("bob's certificate: got %q, %v", name, err)
	}
	if inner.calls != 2 {
		t.Fatalf("a second certificate was verified %d times in all, want 2", inner.calls)
	}

	// Past the leaf's NotAfter the cache must not vouch for it: the inner authenticator
	// runs and its refusal is the answer.
	now = alice.NotAfter.Add(time.Second)
	inner.err = errors.New("x509: certificate has expired or is not yet valid")
	if name, err := authn(alice); err == nil {
		t.Fatalf("expired certificate authenticated as %q", name)
	}
	if inner.calls != 3 {
		t.Fatalf("expired certificate: inner authenticator ran %d times in all, want 3", inner.calls)
	}
	// Refusals are not remembered.
	if _, err := authn(alice); err == nil || inner.calls != 4 {
		t.Fatalf("second request with the expired certificate: err %v, inner calls %d (want an error and 4)", err, inner.calls)
	}
}

func TestCertCacheRemembersNothingTheCADoesNotVouchFor(t *testing.T) {
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ca := newTestCA(t, base.Add(-time.Hour), base.Add(24*time.Hour))
	foreign := newTestCA(t, base.Add(-time.Hour), base.Add(24*time.Hour))
	mallory := foreign.issue(t, "mallory", base.Add(-time.Minute), base.Add(time.Hour))
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	// Even an inner authenticator that wrongly accepts the chain must not get it cached.
	inner := &fakeCertAuthn{}
	c := newCertCache(inner, x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, func() time.Time { return base })
	for range 2 {
		if _, _, err := c.AuthenticateRequest(requestWith(mallory)); err != nil {
			t.Fatal(err)
		}
	}
	if inner.calls != 2 || len(c.entries) != 0 {
		t.Fatalf("foreign certificate: inner ran %d times (want 2), %d cache entries (want 0)", inner.calls, len(c.entries))
	}
}

func TestChainsWindow(t *testing.T) {
	at := func(h int) time.Time { return time.Date(2030, 1, 1, h, 0, 0, 0, time.UTC) }
	cert := func(from, to int) *x509.Certificate { return &x509.Certificate{NotBefore: at(from), NotAfter: at(to)} }
	for _, tc := range []struct {
		name     string
		chains   [][]*x509.Certificate
		from, to int
		valid    bool
	}{
		{"leaf inside CA", [][]*x509.Certificate{{cert(2, 5), cert(0, 20)}}, 2, 5, true},
		{"CA expires first", [][]*x509.Certificate{{cert(2, 10), cert(0, 6)}}, 2, 6, true},
		{"CA starts later", [][]*x509.Certificate{{cert(1, 10), cert(3, 20)}}, 3, 10, true},
		{"two chains", [][]*x509.Certificate{{cert(1, 10), cert(0, 20)}, {cert(1, 10), cert(0, 8)}}, 1, 8, true},
		{"disjoint", [][]*x509.Certificate{{cert(1, 2), cert(3, 20)}}, 3, 2, false},
		{"no chain", nil, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from, to, valid := chainsWindow(tc.chains)
			if valid != tc.valid {
				t.Fatalf("valid %v, want %v", valid, tc.valid)
			}
			if valid && (!from.Equal(at(tc.from)) || !to.Equal(at(tc.to))) {
				t.Fatalf("window %v–%v, want %v–%v", from, to, at(tc.from), at(tc.to))
			}
		})
	}
}

func TestChainKeyTellsChainsApart(t *testing.T) {
	a, b, ab := &x509.Certificate{Raw: []byte("a")}, &x509.Certificate{Raw: []byte("b")}, &x509.Certificate{Raw: []byte("ab")}
	keys := map[string]string{}
	for name, chain := range map[string][]*x509.Certificate{"a": {a}, "ab": {ab}, "a+b": {a, b}, "ab+": {ab, {Raw: nil}}, "b+a": {b, a}} {
		k := chainKey(chain)
		if other, dup := keys[k]; dup {
			t.Fatalf("chains %s and %s share a key", name, other)
		}
		keys[k] = name
	}
}

func TestCertCacheIsBoundedAndSafeForConcurrentUse(t *testing.T) {
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ca := newTestCA(t, base.Add(-time.Hour), base.Add(24*time.Hour))
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	inner := &fakeCertAuthn{}
	c := newCertCache(inner, x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, func() time.Time { return base })
	certs := make([]*x509.Certificate, certCacheSize+16)
	for i := range certs {
		certs[i] = ca.issue(t, "user", base.Add(-time.Minute), base.Add(time.Hour))
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range certs {
				cert := certs[(i+g*37)%len(certs)]
				if resp, ok, err := c.AuthenticateRequest(requestWith(cert)); err != nil || !ok || resp.User.GetName() != "user" {
					t.Errorf("goroutine %d, certificate %d: %v, %v, %v", g, i, resp, ok, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := len(c.entries); n > certCacheSize {
		t.Fatalf("%d cached chains, more than the bound %d", n, certCacheSize)
	}
}
