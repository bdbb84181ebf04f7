package cloud

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// webToken is a parsed, not yet verified, OIDC ID token (a JWS in compact form).
type webToken struct {
	header struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	claims struct {
		Issuer    string    `json:"iss"`
		Subject   string    `json:"sub"`
		Audience  audience  `json:"aud"`
		Expiry    *jsonTime `json:"exp"`
		NotBefore *jsonTime `json:"nbf"`
		IssuedAt  *jsonTime `json:"iat"`
	}
	signed    string // header.payload
	signature []byte
}

// audience is the aud claim: a string or a list of strings.
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*a = audience{s}
		return nil
	}
	var l []string
	if err := json.Unmarshal(b, &l); err != nil {
		return err
	}
	*a = l
	return nil
}

// jsonTime is a NumericDate: seconds since the epoch.
type jsonTime struct{ time.Time }

func (t *jsonTime) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	t.Time = time.Unix(int64(f), 0)
	return nil
}

func errNotJWT() *apiError {
	return errInvalidIdentityToken("The ID Token provided is not a valid JWT. (You may see this error if you sent an Access Token)")
}

func parseJWT(s string) (*webToken, *apiError) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return nil, errNotJWT()
	}
	t := &webToken{signed: parts[0] + "." + parts[1]}
	for i, dst := range []any{&t.header, &t.claims} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil || json.Unmarshal(raw, dst) != nil {
			return nil, errNotJWT()
		}
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, errNotJWT()
	}
	t.signature = sig
	return t, nil
}

// tokenLeeway is the clock skew allowed for nbf and iat.
const tokenLeeway = 5 * time.Minute

func (t *webToken) checkTimes(now time.Time) *apiError {
	if t.claims.Expiry == nil {
		return errInvalidIdentityToken("The token is missing the required claim exp.")
	}
	if !now.Before(t.claims.Expiry.Time) {
		return elbErr("ExpiredTokenException", "Token expired: current date/time %d must be before the expiration date/time %d",
			now.Unix(), t.claims.Expiry.Unix())
	}
	if nbf := t.claims.NotBefore; nbf != nil && now.Add(tokenLeeway).Before(nbf.Time) {
		return errInvalidIdentityToken("Token is not yet valid: its nbf %d is in the future.", nbf.Unix())
	}
	if iat := t.claims.IssuedAt; iat != nil && now.Add(tokenLeeway).Before(iat.Time) {
		return errInvalidIdentityToken("Token was issued in the future: its iat %d is after the current date/time %d.", iat.Unix(), now.Unix())
	}
	return nil
}

// jwk is one key of a JSON Web Key Set (RSA or EC P-256).
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

func (k *jwk) publicKey() (crypto.PublicKey, error) {
	b64 := func(s string) (*big.Int, error) {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("bad key parameter")
		}
		return new(big.Int).SetBytes(b), nil
	}
	switch k.Kty {
	case "RSA":
		n, err := b64(k.N)
		if err != nil {
			return nil, err
		}
		e, err := b64(k.E)
		if err != nil || !e.IsInt64() {
			return nil, fmt.Errorf("bad exponent")
		}
		return &rsa.PublicKey{N: n, E: int(e.Int64())}, nil
	case "EC":
		if k.Crv != "P-256" {
			return nil, fmt.Errorf("curve %s not supported", k.Crv)
		}
		x, err := b64(k.X)
		if err != nil {
			return nil, err
		}
		y, err := b64(k.Y)
		if err != nil {
			return nil, err
		}
		pub := &ecdsa.PublicKey{Curve: elliptic.P256(), X: x, Y: y}
		if !pub.Curve.IsOnCurve(x, y) {
			return nil, fmt.Errorf("point not on curve")
		}
		return pub, nil
	}
	return nil, fmt.Errorf("key type %s not supported", k.Kty)
}

// verify checks the token's signature (RS256 or ES256) with the key its kid names (the
// only key when it names none).
func (t *webToken) verify(keys []jwk) *apiError {
	var cands []jwk
	for _, k := range keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		if t.header.Kid == "" || k.Kid == t.header.Kid {
			cands = append(cands, k)
		}
	}
	if len(cands) == 0 {
		return errInvalidIdentityToken("The provider's keys hold none with the token's kid %q.", t.header.Kid)
	}
	h := sha256.Sum256([]byte(t.signed))
	for _, k := range cands {
		pub, err := k.publicKey()
		if err != nil {
			continue
		}
		switch t.header.Alg {
		case "RS256":
			if rk, ok := pub.(*rsa.PublicKey); ok && rsa.VerifyPKCS1v15(rk, crypto.SHA256, h[:], t.signature) == nil {
				return nil
			}
		case "ES256":
			if ek, ok := pub.(*ecdsa.PublicKey); ok && len(t.signature) == 64 &&
				ecdsa.Verify(ek, h[:], new(big.Int).SetBytes(t.signature[:32]), new(big.Int).SetBytes(t.signature[32:])) {
				return nil
			}
		default:
			return errInvalidIdentityToken("The token's signing algorithm %s is not supported (RS256, ES256 are).", t.header.Alg)
		}
	}
	return errInvalidIdentityToken("The token's signature does not verify with the provider's keys.")
}

var errThumbprint = errors.New("OpenIDConnect provider's HTTPS certificate doesn't match configured thumbprint")

// issuerClient is an HTTPS client for an OIDC issuer: its certificate chain must hold
// a certificate whose SHA-1 fingerprint is one of the provider's thumbprints (the chain
// verified up to that certificate, the leaf valid for the host) or verify against
// Config.IssuerRootCAs up to a root with such a fingerprint; when the provider lists no
// thumbprint, the chain must verify against Config.IssuerRootCAs.
func (c *Cloud) issuerClient(prov *OIDCProvider) *http.Client {
	dial := c.cfg.IssuerDial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	}
	thumbs := append([]string(nil), prov.Thumbprints...)
	roots := c.cfg.IssuerRootCAs
	tlsCfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // VerifyConnection does the verification
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyIssuerChain(cs, thumbs, roots)
		},
	}
	return &http.Client{
		Timeout:   15 * time.Second,
		Transport: &http.Transport{DialContext: dial, TLSClientConfig: tlsCfg, TLSHandshakeTimeout: 10 * time.Second},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Scheme != "https" || len(via) > 5 {
				return errors.New("redirect refused")
			}
			return nil
		},
	}
}

// verifyIssuerChain is the check of an issuer's TLS connection (see issuerClient).
func verifyIssuerChain(cs tls.ConnectionState, thumbs []string, roots *x509.CertPool) error {
	certs := cs.PeerCertificates
	if len(certs) == 0 {
		return errors.New("no certificate")
	}
	inter := x509.NewCertPool()
	for _, ct := range certs[1:] {
		inter.AddCert(ct)
	}
	opts := x509.VerifyOptions{DNSName: cs.ServerName, Intermediates: inter, Roots: roots}
	if len(thumbs) == 0 {
		_, err := certs[0].Verify(opts)
		return err
	}
	for _, ct := range certs {
		if !slices.Contains(thumbs, Thumbprint(ct.Raw)) {
			continue
		}
		pool := x509.NewCertPool()
		pool.AddCert(ct)
		opts.Roots = pool
		_, err := certs[0].Verify(opts)
		return err
	}
	// A server that sends only its leaf: the thumbprint may name the CA that issued it,
	// when that CA is among the configured roots.
	if roots != nil {
		chains, err := certs[0].Verify(opts)
		if err != nil {
			return err
		}
		for _, chain := range chains {
			for _, ct := range chain {
				if slices.Contains(thumbs, Thumbprint(ct.Raw)) {
					return nil
				}
			}
		}
	}
	return errThumbprint
}

// fetchIssuerKeys reads the issuer's discovery document and then its JWKS.
func (c *Cloud) fetchIssuerKeys(ctx context.Context, prov *OIDCProvider, issuer string) ([]jwk, *apiError) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	client := c.issuerClient(prov)
	defer client.CloseIdleConnections()
	base := "https://" + issuerKey(issuer)
	fail := func(what string, err error) *apiError {
		c.log.Info("web identity: issuer unreachable", "issuer", issuer, "step", what, "err", err)
		if errors.Is(err, errThumbprint) {
			return errInvalidIdentityToken("%v", errThumbprint)
		}
		return elbErr("IDPCommunicationError", "Couldn't retrieve verification key from your identity provider, please reference AssumeRoleWithWebIdentity documentation for requirements")
	}
	var disc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := getJSON(ctx, client, base+"/.well-known/openid-configuration", &disc); err != nil {
		return nil, fail("discovery", err)
	}
	u, err := url.Parse(disc.JWKSURI)
	if err != nil || u.Scheme != "https" {
		return nil, fail("jwks_uri", fmt.Errorf("jwks_uri %q is not an https URL", disc.JWKSURI))
	}
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := getJSON(ctx, client, disc.JWKSURI, &set); err != nil {
		return nil, fail("jwks", err)
	}
	return set.Keys, nil
}

func getJSON(ctx context.Context, client *http.Client, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v)
}

// Thumbprint is the SHA-1 fingerprint of a DER-encoded certificate in the form IAM's
// CreateOpenIDConnectProvider takes in ThumbprintList: 40 lower-case hex digits. A
// provider naming the thumbprint of a certificate of its issuer's served chain (the
// cluster CA's, or the serving certificate's) trusts that chain.
func Thumbprint(der []byte) string {
	sum := sha1.Sum(der)
	return hex.EncodeToString(sum[:])
}
