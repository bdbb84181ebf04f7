package kubelet

import (
	"context"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

const (
	// tokenMaxAge is the age at which a token is replaced even when far from expiring.
	tokenMaxAge = 24 * time.Hour
	// tokenRetry is when a token whose refresh failed is asked for again, while the
	// cached one is still valid.
	tokenRetry = 10 * time.Second
	// defaultTokenExpirationSeconds is a serviceAccountToken source's lifetime when it
	// names none.
	defaultTokenExpirationSeconds = 60 * 60
)

// tokenRequester asks the API server for a token of service account sa of namespace
// ns (serviceaccounts/<sa>/token).
type tokenRequester func(ctx context.Context, ns, sa string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)

// clientTokenRequester is the tokenRequester of a clientset.
func clientTokenRequester(client kubernetes.Interface) tokenRequester {
	return func(ctx context.Context, ns, sa string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
		return client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, tr, metav1.CreateOptions{})
	}
}

// serviceAccountTokens are the tokens of the node's projected serviceAccountToken
// volume sources: requested from the API server bound to their pod (kind Pod, name,
// uid) with the source's audience and expirationSeconds, and cached per pod and source
// until they need a refresh (tokenRefreshAt). A refresh that fails keeps the cached
// token while it is valid.
type serviceAccountTokens struct {
	request tokenRequester
	clock   clock.PassiveClock

	mu    sync.Mutex
	cache map[tokenKey]*authenticationv1.TokenRequest
}

// tokenKey is one pod's token source.
type tokenKey struct {
	pod               types.UID
	serviceAccount    string
	audience          string
	expirationSeconds int64
}

func newServiceAccountTokens(request tokenRequester, clk clock.PassiveClock) *serviceAccountTokens {
	return &serviceAccountTokens{request: request, clock: clk, cache: map[tokenKey]*authenticationv1.TokenRequest{}}
}

// token is the token of the pod's source src, and when it must be refreshed.
func (m *serviceAccountTokens) token(ctx context.Context, pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection) (string, time.Time, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	exp := int64(defaultTokenExpirationSeconds)
	if src.ExpirationSeconds != nil {
		exp = *src.ExpirationSeconds
	}
	key := tokenKey{pod: pod.UID, serviceAccount: sa, audience: src.Audience, expirationSeconds: exp}
	m.mu.Lock()
	cached := m.cache[key]
	m.mu.Unlock()
	now := m.clock.Now()
	if cached != nil && now.Before(tokenRefreshAt(cached)) {
		return cached.Status.Token, tokenRefreshAt(cached), nil
	}
	var audiences []string
	if src.Audience != "" {
		audiences = []string{src.Audience}
	}
	tr, err := m.request(ctx, pod.Namespace, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         audiences,
		ExpirationSeconds: &exp,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
	}})
	if err == nil && (tr.Status.Token == "" || tr.Spec.ExpirationSeconds == nil) {
		err = fmt.Errorf("the API server answered without a token or its expiration")
	}
	if err != nil {
		if cached != nil && now.Before(cached.Status.ExpirationTimestamp.Time) {
			return cached.Status.Token, now.Add(tokenRetry), nil
		}
		return "", time.Time{}, fmt.Errorf("fetch token of service account %s/%s: %w", pod.Namespace, sa, err)
	}
	m.mu.Lock()
	m.cache[key] = tr
	m.mu.Unlock()
	return tr.Status.Token, tokenRefreshAt(tr), nil
}

// forget drops the tokens of the pod.
func (m *serviceAccountTokens) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.cache {
		if k.pod == uid {
			delete(m.cache, k)
		}
	}
}

// tokenRefreshAt is when a token is replaced: when 80% of its lifetime has passed or
// tokenMaxAge after it was issued, whichever comes first.
func tokenRefreshAt(tr *authenticationv1.TokenRequest) time.Time {
	exp := tr.Status.ExpirationTimestamp.Time
	ttl := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	at := exp.Add(-ttl / 5)
	if byAge := exp.Add(-ttl).Add(tokenMaxAge); byAge.Before(at) {
		at = byAge
	}
	return at
}
