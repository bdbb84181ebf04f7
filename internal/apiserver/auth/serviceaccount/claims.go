package serviceaccount

import (
	"errors"
	"time"

	"github.com/golang-jwt/jwt/v5"
	corev1 "k8s.io/api/core/v1"
	apiserverserviceaccount "k8s.io/apiserver/pkg/authentication/serviceaccount"
)

// DefaultIssuer is the iss of the tokens (and the API server's audience), as the
// kubernetes Service's in-cluster DNS name.
const DefaultIssuer = "https://kubernetes.default.svc.cluster.local"

// Claims are a token's claims: the registered ones and the private "kubernetes.io".
type Claims struct {
	jwt.RegisteredClaims
	Kubernetes PrivateClaims `json:"kubernetes.io"`
}

// PrivateClaims say whose token it is and what it is bound to.
type PrivateClaims struct {
	Namespace      string `json:"namespace,omitempty"`
	ServiceAccount Ref    `json:"serviceaccount"`
	Pod            *Ref   `json:"pod,omitempty"`
	Secret         *Ref   `json:"secret,omitempty"`
	Node           *Ref   `json:"node,omitempty"`
	// WarnAfter is the expiration the client asked for when the token's exp was
	// extended (TokenSpec.WarnAfter).
	WarnAfter *jwt.NumericDate `json:"warnafter,omitempty"`
}

// Ref names an object by name and uid.
type Ref struct {
	Name string `json:"name,omitempty"`
	UID  string `json:"uid,omitempty"`
}

// TokenSpec is what a token is issued for.
type TokenSpec struct {
	ServiceAccount *corev1.ServiceAccount
	// At most one of Pod and Secret binds the token; Node binds it alone or, with Pod,
	// names the pod's node.
	Pod    *corev1.Pod
	Secret *corev1.Secret
	Node   *corev1.Node
	// Audiences become aud.
	Audiences []string
	// Expiration is the token's lifetime (exp - iat).
	Expiration time.Duration
	// WarnAfter, when positive, is recorded as warnafter (iat + WarnAfter): the lifetime
	// the client asked for when Expiration was extended beyond it.
	WarnAfter time.Duration
}

// NewClaims are the claims of a token for spec issued by iss at now with id jti.
func NewClaims(iss string, spec TokenSpec, now time.Time, jti string) (*Claims, error) {
	sa := spec.ServiceAccount
	if sa == nil {
		return nil, errors.New("a token needs a service account")
	}
	if spec.Secret != nil && (spec.Pod != nil || spec.Node != nil) {
		return nil, errors.New("a token can only be bound to one object")
	}
	now = now.Truncate(time.Second)
	c := &Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    iss,
			Subject:   apiserverserviceaccount.MakeUsername(sa.Namespace, sa.Name),
			Audience:  jwt.ClaimStrings(spec.Audiences),
			ExpiresAt: jwt.NewNumericDate(now.Add(spec.Expiration)),
			NotBefore: jwt.NewNumericDate(now),
			IssuedAt:  jwt.NewNumericDate(now),
			ID:        jti,
		},
		Kubernetes: PrivateClaims{
			Namespace:      sa.Namespace,
			ServiceAccount: Ref{Name: sa.Name, UID: string(sa.UID)},
		},
	}
	switch {
	case spec.Pod != nil:
		c.Kubernetes.Pod = &Ref{Name: spec.Pod.Name, UID: string(spec.Pod.UID)}
	case spec.Secret != nil:
		c.Kubernetes.Secret = &Ref{Name: spec.Secret.Name, UID: string(spec.Secret.UID)}
	}
	if spec.Node != nil {
		c.Kubernetes.Node = &Ref{Name: spec.Node.Name, UID: string(spec.Node.UID)}
	}
	if spec.WarnAfter > 0 {
		c.Kubernetes.WarnAfter = jwt.NewNumericDate(now.Add(spec.WarnAfter))
	}
	return c, nil
}
