package serviceaccount

import (
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	apiserverserviceaccount "k8s.io/apiserver/pkg/authentication/serviceaccount"
	tokenjwt "k8s.io/apiserver/pkg/authentication/token/jwt"
)

// Leeway is how far the clocks of token issuers and the API server may disagree: a
// token is accepted until a minute after exp, and an object deleted less than a minute
// ago still backs it.
const Leeway = time.Minute

// StaleTokenAnnotation is the audit annotation of a request whose token is past its
// warnafter.
const StaleTokenAnnotation = "authentication.k8s.io/stale-token"

// AuthenticatorConfig configures an Authenticator.
type AuthenticatorConfig struct {
	// Issuers are the iss values tokens may have ([DefaultIssuer] when empty), as
	// kube-apiserver accepts every --service-account-issuer.
	Issuers []string
	// Keys are the public keys tokens may be signed with (LoadPublicKeys).
	Keys []crypto.PublicKey
	// Audiences are the audiences a request's token must share one of when the request
	// does not name its own (authenticator.WithAudiences); Issuers when empty.
	Audiences []string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

func (c *AuthenticatorConfig) validate() error {
	if len(c.Keys) == 0 {
		return errors.New("service account token authenticator: at least one public key is required")
	}
	return nil
}

// Authenticator is the bearer-token authenticator of service account tokens.
type Authenticator struct {
	cfg    AuthenticatorConfig
	keys   []verificationKey
	getter Getter
	parser *jwt.Parser
}

type verificationKey struct {
	kid string
	key crypto.PublicKey
}

var _ authenticator.Token = (*Authenticator)(nil)

// NewAuthenticator checks cfg and returns an Authenticator that reads the objects tokens
// name through getter.
func NewAuthenticator(cfg AuthenticatorConfig, getter Getter) (*Authenticator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if getter == nil {
		return nil, errors.New("service account token authenticator: a getter is required")
	}
	if len(cfg.Issuers) == 0 {
		cfg.Issuers = []string{DefaultIssuer}
	}
	if len(cfg.Audiences) == 0 {
		cfg.Audiences = slices.Clone(cfg.Issuers)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a := &Authenticator{cfg: cfg, getter: getter,
		parser: jwt.NewParser(jwt.WithValidMethods([]string{jwt.SigningMethodES256.Alg(), jwt.SigningMethodRS256.Alg()}),
			jwt.WithoutClaimsValidation())}
	for _, k := range cfg.Keys {
		kid, err := KeyID(k)
		if err != nil {
			return nil, fmt.Errorf("service account token authenticator: %w", err)
		}
		a.keys = append(a.keys, verificationKey{kid: kid, key: k})
	}
	return a, nil
}

// AuthenticateToken implements authenticator.Token (see the package's contract).
func (a *Authenticator) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	if !slices.Contains(a.cfg.Issuers, issuerOf(token)) {
		return nil, false, nil
	}
	claims := &Claims{}
	if _, err := a.parser.ParseWithClaims(token, claims, a.keyFor); err != nil {
		return nil, false, fmt.Errorf("service account token: %w", err)
	}
	// The unverified iss chose this authenticator; the signed one must agree.
	if !slices.Contains(a.cfg.Issuers, claims.Issuer) {
		return nil, false, fmt.Errorf("token issuer %q is invalid", claims.Issuer)
	}
	tokenAuds := authenticator.Audiences(claims.Audience)
	if len(tokenAuds) == 0 {
		return nil, false, errors.New("token does not have a valid audience")
	}
	wanted, ok := authenticator.AudiencesFrom(ctx)
	if !ok {
		wanted = a.cfg.Audiences
	}
	auds := tokenAuds.Intersect(wanted)
	if len(auds) == 0 {
		return nil, false, fmt.Errorf("token audiences %q is invalid for the target audiences %q", tokenAuds, wanted)
	}
	now := a.cfg.Now()
	if err := checkTimes(&claims.RegisteredClaims, now); err != nil {
		return nil, false, err
	}
	info, err := a.validate(ctx, claims, now)
	if err != nil {
		return nil, false, err
	}
	if w := claims.Kubernetes.WarnAfter; w != nil && now.After(w.Time) {
		audit.AddAuditAnnotation(ctx, StaleTokenAnnotation,
			fmt.Sprintf("subject: %s, seconds after warning threshold: %d", claims.Subject, now.Unix()-w.Time.Unix()))
	}
	return &authenticator.Response{User: info.UserInfo(), Audiences: auds}, true, nil
}

// keyFor is the keys that may have signed tok: those of its kid, or all of them when
// it names none (or one not in the set).
func (a *Authenticator) keyFor(tok *jwt.Token) (any, error) {
	kid, _ := tok.Header["kid"].(string)
	var set jwt.VerificationKeySet
	for _, k := range a.keys {
		if kid != "" && k.kid == kid {
			set.Keys = append(set.Keys, k.key)
		}
	}
	if len(set.Keys) == 0 {
		for _, k := range a.keys {
			set.Keys = append(set.Keys, k.key)
		}
	}
	return set, nil
}

// issuerOf is the iss of a JWT, unverified; "" for what is not a JWT.
func issuerOf(token string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return ""
	}
	var c struct {
		Issuer string `json:"iss"`
	}
	if json.Unmarshal(payload, &c) != nil {
		return ""
	}
	return c.Issuer
}

// checkTimes refuses a token without exp, expired, not yet valid or issued in the
// future, allowing Leeway each way.
func checkTimes(c *jwt.RegisteredClaims, now time.Time) error {
	switch {
	case c.ExpiresAt == nil:
		return errors.New("service account token has no expiration")
	case now.After(c.ExpiresAt.Add(Leeway)):
		return errors.New("service account token has expired")
	case c.NotBefore != nil && now.Add(Leeway).Before(c.NotBefore.Time):
		return errors.New("service account token is not valid yet")
	case c.IssuedAt != nil && now.Add(Leeway).Before(c.IssuedAt.Time):
		return errors.New("service account token is issued in the future")
	}
	return nil
}

// errInvalidated is the answer for a token whose bound object is gone.
var errInvalidated = errors.New("service account token has been invalidated")

// validate checks that the objects the token names still exist as it names them, and
// returns whom it authenticates.
func (a *Authenticator) validate(ctx context.Context, c *Claims, now time.Time) (*apiserverserviceaccount.ServiceAccountInfo, error) {
	deletedBefore := now.Add(-Leeway)
	deleted := func(ts *metav1.Time) bool { return ts != nil && ts.Time.Before(deletedBefore) }
	k := c.Kubernetes
	ns, saRef := k.Namespace, k.ServiceAccount
	if ns == "" || saRef.Name == "" || saRef.UID == "" {
		return nil, errors.New("service account token does not name its service account")
	}
	sa, err := a.getter.ServiceAccount(ctx, ns, saRef.Name, types.UID(saRef.UID))
	if err != nil {
		return nil, err
	}
	if string(sa.UID) != saRef.UID {
		return nil, fmt.Errorf("service account UID (%s) does not match claim (%s)", sa.UID, saRef.UID)
	}
	if deleted(sa.DeletionTimestamp) {
		return nil, fmt.Errorf("service account %s/%s has been deleted", ns, saRef.Name)
	}
	if ref := k.Secret; ref != nil {
		secret, err := a.getter.Secret(ctx, ns, ref.Name, types.UID(ref.UID))
		if err != nil {
			return nil, errInvalidated
		}
		if string(secret.UID) != ref.UID {
			return nil, fmt.Errorf("secret UID (%s) does not match service account secret ref claim (%s)", secret.UID, ref.UID)
		}
		if deleted(secret.DeletionTimestamp) {
			return nil, errInvalidated
		}
	}
	info := &apiserverserviceaccount.ServiceAccountInfo{Namespace: ns, Name: saRef.Name, UID: saRef.UID,
		CredentialID: tokenjwt.CredentialIDForJTI(c.ID)}
	if ref := k.Pod; ref != nil {
		pod, err := a.getter.Pod(ctx, ns, ref.Name, types.UID(ref.UID))
		if err != nil {
			return nil, errInvalidated
		}
		if string(pod.UID) != ref.UID {
			return nil, fmt.Errorf("pod UID (%s) does not match service account pod ref claim (%s)", pod.UID, ref.UID)
		}
		if deleted(pod.DeletionTimestamp) {
			return nil, errInvalidated
		}
		info.PodName, info.PodUID = ref.Name, ref.UID
	}
	if ref := k.Node; ref != nil {
		if k.Pod == nil {
			// Bound to the node itself: the node must still be there.
			node, err := a.getter.Node(ctx, ref.Name, types.UID(ref.UID))
			if err != nil {
				return nil, errInvalidated
			}
			if string(node.UID) != ref.UID {
				return nil, fmt.Errorf("node UID (%s) does not match service account node ref claim (%s)", node.UID, ref.UID)
			}
			if deleted(node.DeletionTimestamp) {
				return nil, errInvalidated
			}
		}
		info.NodeName, info.NodeUID = ref.Name, ref.UID
	}
	return info, nil
}
