package serviceaccount

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
)

// IssuerConfig configures an Issuer.
type IssuerConfig struct {
	// Issuer is the tokens' iss (DefaultIssuer when empty).
	Issuer string
	// Key signs the tokens (LoadSigningKey): ES256 for an ECDSA P-256 key, RS256 for an
	// RSA key.
	Key crypto.Signer
	// Now is the clock (time.Now when nil); NewID makes jti (a random UUID when nil).
	Now   func() time.Time
	NewID func() string
}

func (c *IssuerConfig) validate() error {
	if c.Key == nil {
		return errors.New("service account token issuer: a signing key is required")
	}
	if _, err := signingMethod(c.Key); err != nil {
		return fmt.Errorf("service account token issuer: %w", err)
	}
	return nil
}

// Issuer signs service account tokens.
type Issuer struct {
	cfg    IssuerConfig
	method jwt.SigningMethod
	kid    string
}

// NewIssuer checks cfg and returns its Issuer.
func NewIssuer(cfg IssuerConfig) (*Issuer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Issuer == "" {
		cfg.Issuer = DefaultIssuer
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewID == nil {
		cfg.NewID = uuid.NewString
	}
	method, _ := signingMethod(cfg.Key)
	kid, err := KeyID(cfg.Key.Public())
	if err != nil {
		return nil, fmt.Errorf("service account token issuer: %w", err)
	}
	return &Issuer{cfg: cfg, method: method, kid: kid}, nil
}

// signingMethod is the JWS algorithm of a key.
func signingMethod(key crypto.Signer) (jwt.SigningMethod, error) {
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		if _, err := checkKey(k); err != nil {
			return nil, err
		}
		return jwt.SigningMethodES256, nil
	case *rsa.PrivateKey:
		return jwt.SigningMethodRS256, nil
	}
	return nil, fmt.Errorf("%T keys are not supported (ECDSA P-256 and RSA are)", key)
}

// Name is the issuer's iss.
func (i *Issuer) Name() string { return i.cfg.Issuer }

// Now is the issuer's clock.
func (i *Issuer) Now() time.Time { return i.cfg.Now() }

// Issue signs a token for spec, valid from now for spec.Expiration, and returns it with
// its claims.
func (i *Issuer) Issue(spec TokenSpec) (string, *Claims, error) {
	if spec.Expiration <= 0 {
		return "", nil, errors.New("issue service account token: the expiration must be positive")
	}
	claims, err := NewClaims(i.cfg.Issuer, spec, i.cfg.Now(), i.cfg.NewID())
	if err != nil {
		return "", nil, fmt.Errorf("issue service account token: %w", err)
	}
	tok := jwt.NewWithClaims(i.method, claims)
	tok.Header["kid"] = i.kid
	signed, err := tok.SignedString(i.cfg.Key)
	if err != nil {
		return "", nil, fmt.Errorf("sign service account token: %w", err)
	}
	return signed, claims, nil
}
