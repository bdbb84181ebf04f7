package apiserver

import (
	"crypto/x509"
	"net/http"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
)

// certCacheSize bounds how many client certificate chains certCache remembers; a
// cluster has a few per component and node.
const certCacheSize = 1024

// certCache remembers which user a client certificate chain authenticated as, so that
// the chain is verified once rather than on every request (an ECDSA signature check,
// about a tenth of a create's CPU). The verify options (cluster CA, client-auth usage)
// are fixed for the server's life, so a chain that verified stays verified until a
// certificate in it expires: an entry is used only within the validity window of every
// certificate of the verified chains, and past it the request is verified afresh (and an
// expired certificate refused). Chains that fail are never remembered. On a hit the
// inner authenticator does not run, so its client-certificate expiry histogram counts a
// certificate once per cache entry rather than once per request.
type certCache struct {
	inner  authenticator.Request
	verify x509.VerifyOptions
	now    func() time.Time

	mu      sync.RWMutex
	entries map[string]certEntry
}

type certEntry struct {
	resp                *authenticator.Response
	notBefore, notAfter time.Time
}

// newCertCache caches inner, an x509 authenticator verifying with verify.
func newCertCache(inner authenticator.Request, verify x509.VerifyOptions, now func() time.Time) *certCache {
	return &certCache{inner: inner, verify: verify, now: now, entries: map[string]certEntry{}}
}

func (c *certCache) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	if req.TLS == nil || len(req.TLS.PeerCertificates) == 0 {
		return c.inner.AuthenticateRequest(req)
	}
	certs := req.TLS.PeerCertificates
	now := c.now()
	if e, ok := c.lookup(certs); ok && inWindow(now, e.notBefore, e.notAfter) {
		resp := *e.resp // callers get their own copy
		return &resp, true, nil
	}
	resp, ok, err := c.inner.AuthenticateRequest(req)
	if err != nil || !ok {
		return resp, ok, err
	}
	if notBefore, notAfter, valid := c.window(certs, now); valid {
		c.store(chainKey(certs), certEntry{resp: resp, notBefore: notBefore, notAfter: notAfter}, now)
	}
	return resp, ok, err
}

func (c *certCache) lookup(certs []*x509.Certificate) (certEntry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(certs) == 1 {
		e, ok := c.entries[string(certs[0].Raw)] // no allocation for the common case
		return e, ok
	}
	e, ok := c.entries[chainKey(certs)]
	return e, ok
}

func (c *certCache) store(key string, e certEntry, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= certCacheSize {
		for k, old := range c.entries {
			if !inWindow(now, old.notBefore, old.notAfter) {
				delete(c.entries, k)
			}
		}
	}
	for k := range c.entries {
		if len(c.entries) < certCacheSize {
			break
		}
		delete(c.entries, k)
	}
	c.entries[key] = e
}

// window is the time span in which every certificate of the chains that certs (leaf
// first, then intermediates) verify to is valid; valid is false when they do not verify.
func (c *certCache) window(certs []*x509.Certificate, now time.Time) (notBefore, notAfter time.Time, valid bool) {
	opts := c.verify
	opts.CurrentTime = now
	if opts.Intermediates == nil && len(certs) > 1 {
		opts.Intermediates = x509.NewCertPool()
		for _, cert := range certs[1:] {
			opts.Intermediates.AddCert(cert)
		}
	}
	chains, err := certs[0].Verify(opts)
	if err != nil || len(chains) == 0 {
		return time.Time{}, time.Time{}, false
	}
	return chainsWindow(chains)
}

// chainsWindow intersects the validity periods of every certificate in chains.
func chainsWindow(chains [][]*x509.Certificate) (notBefore, notAfter time.Time, valid bool) {
	first := true
	for _, chain := range chains {
		for _, cert := range chain {
			if first || cert.NotBefore.After(notBefore) {
				notBefore = cert.NotBefore
			}
			if first || cert.NotAfter.Before(notAfter) {
				notAfter = cert.NotAfter
			}
			first = false
		}
	}
	return notBefore, notAfter, !first && !notAfter.Before(notBefore)
}

// inWindow says whether now lies in [notBefore, notAfter], as x509 validity does.
func inWindow(now, notBefore, notAfter time.Time) bool {
	return !now.Before(notBefore) && !now.After(notAfter)
}

// chainKey identifies a presented chain by the DER bytes of its certificates.
func chainKey(certs []*x509.Certificate) string {
	if len(certs) == 1 {
		return string(certs[0].Raw)
	}
	n := 0
	for _, cert := range certs {
		n += 4 + len(cert.Raw)
	}
	b := make([]byte, 0, n)
	for _, cert := range certs {
		l := len(cert.Raw)
		b = append(b, byte(l>>24), byte(l>>16), byte(l>>8), byte(l))
		b = append(b, cert.Raw...)
	}
	return string(b)
}
