package serviceaccount

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/authenticator"
)

// fakeGetter serves objects from maps keyed by namespace/name (name for nodes).
type fakeGetter struct {
	sas     map[string]*corev1.ServiceAccount
	pods    map[string]*corev1.Pod
	secrets map[string]*corev1.Secret
	nodes   map[string]*corev1.Node
}

func notFound(kind, name string) error {
	return apierrors.NewNotFound(corev1.Resource(kind), name)
}

func (f *fakeGetter) ServiceAccount(_ context.Context, ns, name string, _ types.UID) (*corev1.ServiceAccount, error) {
	if o, ok := f.sas[ns+"/"+name]; ok {
		return o, nil
	}
	return nil, notFound("serviceaccounts", name)
}

func (f *fakeGetter) Pod(_ context.Context, ns, name string, _ types.UID) (*corev1.Pod, error) {
	if o, ok := f.pods[ns+"/"+name]; ok {
		return o, nil
	}
	return nil, notFound("pods", name)
}

func (f *fakeGetter) Secret(_ context.Context, ns, name string, _ types.UID) (*corev1.Secret, error) {
	if o, ok := f.secrets[ns+"/"+name]; ok {
		return o, nil
	}
	return nil, notFound("secrets", name)
}

func (f *fakeGetter) Node(_ context.Context, name string, _ types.UID) (*corev1.Node, error) {
	if o, ok := f.nodes[name]; ok {
		return o, nil
	}
	return nil, notFound("nodes", name)
}

func meta(ns, name, uid string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}
}

// fixture is a cluster with a service account, a pod on a node and a secret, an issuer
// and an authenticator sharing a clock the test moves.
type fixture struct {
	now    time.Time
	getter *fakeGetter
	sa     *corev1.ServiceAccount
	pod    *corev1.Pod
	secret *corev1.Secret
	node   *corev1.Node
	issuer *Issuer
	authn  *Authenticator
}

func newFixture(t testing.TB, key crypto.Signer) *fixture {
	t.Helper()
	f := &fixture{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	f.sa = &corev1.ServiceAccount{ObjectMeta: meta("team", "builder", "sa-uid")}
	f.node = &corev1.Node{ObjectMeta: meta("", "node-1", "node-uid")}
	f.pod = &corev1.Pod{ObjectMeta: meta("team", "web", "pod-uid"), Spec: corev1.PodSpec{ServiceAccountName: "builder", NodeName: "node-1"}}
	f.secret = &corev1.Secret{ObjectMeta: meta("team", "bound", "secret-uid")}
	f.getter = &fakeGetter{
		sas:     map[string]*corev1.ServiceAccount{"team/builder": f.sa},
		pods:    map[string]*corev1.Pod{"team/web": f.pod},
		secrets: map[string]*corev1.Secret{"team/bound": f.secret},
		nodes:   map[string]*corev1.Node{"node-1": f.node},
	}
	clock := func() time.Time { return f.now }
	var err error
	if f.issuer, err = NewIssuer(IssuerConfig{Key: key, Now: clock, NewID: func() string { return "the-jti" }}); err != nil {
		t.Fatal(err)
	}
	if f.authn, err = NewAuthenticator(AuthenticatorConfig{Keys: []crypto.PublicKey{key.Public()}, Now: clock}, f.getter); err != nil {
		t.Fatal(err)
	}
	return f
}

func ecKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (f *fixture) issue(t testing.TB, spec TokenSpec) string {
	t.Helper()
	if spec.ServiceAccount == nil {
		spec.ServiceAccount = f.sa
	}
	if spec.Expiration == 0 {
		spec.Expiration = time.Hour
	}
	if spec.Audiences == nil {
		spec.Audiences = []string{DefaultIssuer}
	}
	tok, _, err := f.issuer.Issue(spec)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (f *fixture) authenticate(t *testing.T, ctx context.Context, tok string) (*authenticator.Response, bool, error) {
	t.Helper()
	return f.authn.AuthenticateToken(ctx, tok)
}

// mustFail asserts that the token is recognised as a service account token and refused
// with an error containing want.
func (f *fixture) mustFail(t *testing.T, tok, want string) {
	t.Helper()
	resp, ok, err := f.authenticate(t, context.Background(), tok)
	if ok || resp != nil || err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("authenticate = %v, %v, %v; want an error containing %q", resp, ok, err, want)
	}
}

func TestPodBoundTokenAuthenticates(t *testing.T) {
	f := newFixture(t, ecKey(t))
	tok := f.issue(t, TokenSpec{Pod: f.pod, Node: f.node})
	resp, ok, err := f.authenticate(t, context.Background(), tok)
	if err != nil || !ok {
		t.Fatalf("authenticate = %v, %v", ok, err)
	}
	u := resp.User
	if u.GetName() != "system:serviceaccount:team:builder" || u.GetUID() != "sa-uid" {
		t.Errorf("user %q uid %q", u.GetName(), u.GetUID())
	}
	if want := []string{"system:serviceaccounts", "system:serviceaccounts:team"}; !reflect.DeepEqual(u.GetGroups(), want) {
		t.Errorf("groups %v, want %v", u.GetGroups(), want)
	}
	wantExtra := map[string][]string{
		"authentication.kubernetes.io/pod-name":      {"web"},
		"authentication.kubernetes.io/pod-uid":       {"pod-uid"},
		"authentication.kubernetes.io/node-name":     {"node-1"},
		"authentication.kubernetes.io/node-uid":      {"node-uid"},
		"authentication.kubernetes.io/credential-id": {"JTI=the-jti"},
	}
	if !reflect.DeepEqual(u.GetExtra(), wantExtra) {
		t.Errorf("extra %v, want %v", u.GetExtra(), wantExtra)
	}
	if !reflect.DeepEqual([]string(resp.Audiences), []string{DefaultIssuer}) {
		t.Errorf("audiences %v", resp.Audiences)
	}
}

func TestTokenClaimsAndHeader(t *testing.T) {
	key := ecKey(t)
	f := newFixture(t, key)
	tok := f.issue(t, TokenSpec{Pod: f.pod, Node: f.node, Expiration: 3607 * time.Second, WarnAfter: time.Hour})
	parts := strings.Split(tok, ".")
	decode := func(s string) map[string]any {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	kid, _ := KeyID(key.Public())
	if h := decode(parts[0]); h["alg"] != "ES256" || h["kid"] != kid {
		t.Errorf("header %v, want alg ES256 kid %s", h, kid)
	}
	c := decode(parts[1])
	iat := float64(f.now.Unix())
	want := map[string]any{
		"iss": DefaultIssuer, "sub": "system:serviceaccount:team:builder", "aud": []any{DefaultIssuer},
		"iat": iat, "nbf": iat, "exp": iat + 3607, "jti": "the-jti",
		"kubernetes.io": map[string]any{
			"namespace":      "team",
			"serviceaccount": map[string]any{"name": "builder", "uid": "sa-uid"},
			"pod":            map[string]any{"name": "web", "uid": "pod-uid"},
			"node":           map[string]any{"name": "node-1", "uid": "node-uid"},
			"warnafter":      iat + 3600,
		},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("claims\n%v\nwant\n%v", c, want)
	}
}

func TestRSAKeySignsRS256(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, key)
	tok := f.issue(t, TokenSpec{})
	if h, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0]); !strings.Contains(string(h), `"RS256"`) {
		t.Errorf("header %s, want RS256", h)
	}
	if _, ok, err := f.authenticate(t, context.Background(), tok); !ok || err != nil {
		t.Errorf("authenticate = %v, %v", ok, err)
	}
}

func TestForeignTokensAreNotOurs(t *testing.T) {
	f := newFixture(t, ecKey(t))
	other, err := NewIssuer(IssuerConfig{Issuer: "https://elsewhere.example", Key: ecKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	foreign, _, err := other.Issue(TokenSpec{ServiceAccount: f.sa, Expiration: time.Hour, Audiences: []string{DefaultIssuer}})
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{"another issuer": foreign, "not a JWT": "0123456789abcdef", "three dots": "a.b.c", "empty": ""} {
		if resp, ok, err := f.authenticate(t, context.Background(), tok); resp != nil || ok || err != nil {
			t.Errorf("%s: authenticate = %v, %v, %v; want not ours (nil, false, nil)", name, resp, ok, err)
		}
	}
}

// With several issuers, the tokens of each are accepted, for the audiences of all of
// them by default; a token of an issuer not named stays another authenticator's.
func TestSeveralIssuers(t *testing.T) {
	key := ecKey(t)
	f := newFixture(t, key)
	const newIssuer = "https://172.31.0.2:443"
	authn, err := NewAuthenticator(AuthenticatorConfig{Issuers: []string{newIssuer, DefaultIssuer},
		Keys: []crypto.PublicKey{key.Public()}, Now: func() time.Time { return f.now }}, f.getter)
	if err != nil {
		t.Fatal(err)
	}
	current, err := NewIssuer(IssuerConfig{Issuer: newIssuer, Key: key, Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	newTok, _, err := current.Issue(TokenSpec{ServiceAccount: f.sa, Expiration: time.Hour, Audiences: []string{newIssuer}})
	if err != nil {
		t.Fatal(err)
	}
	// A token of the old issuer, for its audience, as an existing pod holds.
	oldTok := f.issue(t, TokenSpec{})
	for name, tok := range map[string]string{"first issuer": newTok, "second issuer": oldTok} {
		resp, ok, err := authn.AuthenticateToken(context.Background(), tok)
		if !ok || err != nil || resp.User.GetName() != "system:serviceaccount:team:builder" {
			t.Errorf("%s: authenticate = %v, %v, %v", name, resp, ok, err)
		}
	}
	other, err := NewIssuer(IssuerConfig{Issuer: "https://elsewhere.example", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	foreign, _, err := other.Issue(TokenSpec{ServiceAccount: f.sa, Expiration: time.Hour, Audiences: []string{newIssuer}})
	if err != nil {
		t.Fatal(err)
	}
	if resp, ok, err := authn.AuthenticateToken(context.Background(), foreign); resp != nil || ok || err != nil {
		t.Errorf("another issuer's token: authenticate = %v, %v, %v; want not ours", resp, ok, err)
	}
	// Only the issuer may be the audience by default: one for STS is not the API server's.
	sts, _, err := current.Issue(TokenSpec{ServiceAccount: f.sa, Expiration: time.Hour, Audiences: []string{"sts.amazonaws.com"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := authn.AuthenticateToken(context.Background(), sts); ok || err == nil || !strings.Contains(err.Error(), "audiences") {
		t.Errorf("a token for sts.amazonaws.com: authenticate = %v, %v; want refused for its audience", ok, err)
	}
}

func TestSignatureIsChecked(t *testing.T) {
	f := newFixture(t, ecKey(t))
	// Same issuer, another key.
	forger := newFixture(t, ecKey(t))
	f.mustFail(t, forger.issue(t, TokenSpec{}), "signature is invalid")

	// A payload changed after signing.
	parts := strings.Split(f.issue(t, TokenSpec{}), ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	payload = []byte(strings.Replace(string(payload), `"name":"builder"`, `"name":"admin01"`, 1))
	parts[1] = base64.RawURLEncoding.EncodeToString(payload)
	f.mustFail(t, strings.Join(parts, "."), "signature is invalid")

	// alg none.
	unsigned := jwt.NewWithClaims(jwt.SigningMethodNone, &Claims{RegisteredClaims: jwt.RegisteredClaims{Issuer: DefaultIssuer,
		Audience: jwt.ClaimStrings{DefaultIssuer}, ExpiresAt: jwt.NewNumericDate(f.now.Add(time.Hour))},
		Kubernetes: PrivateClaims{Namespace: "team", ServiceAccount: Ref{Name: "builder", UID: "sa-uid"}}})
	none, err := unsigned.SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	f.mustFail(t, none, "signing method none is invalid")
}

func TestAudienceIsChecked(t *testing.T) {
	f := newFixture(t, ecKey(t))
	vault := f.issue(t, TokenSpec{Audiences: []string{"vault"}})
	f.mustFail(t, vault, `token audiences ["vault"] is invalid for the target audiences ["`+DefaultIssuer+`"]`)
	// A request that names its audiences (a token review for vault, say) gets them.
	resp, ok, err := f.authenticate(t, authenticator.WithAudiences(context.Background(), authenticator.Audiences{"vault"}), vault)
	if !ok || err != nil || !reflect.DeepEqual([]string(resp.Audiences), []string{"vault"}) {
		t.Errorf("authenticate for vault = %v, %v, %v", resp, ok, err)
	}
	f.mustFail(t, f.issue(t, TokenSpec{Audiences: []string{}}), "token does not have a valid audience")
}

func TestExpiryIsChecked(t *testing.T) {
	f := newFixture(t, ecKey(t))
	tok := f.issue(t, TokenSpec{Expiration: 10 * time.Minute})
	start := f.now
	// Within the minute of leeway after exp: still good.
	f.now = start.Add(10*time.Minute + 30*time.Second)
	if _, ok, err := f.authenticate(t, context.Background(), tok); !ok || err != nil {
		t.Errorf("within the leeway: %v, %v", ok, err)
	}
	f.now = start.Add(11*time.Minute + time.Second)
	f.mustFail(t, tok, "service account token has expired")

	// Issued by a clock ahead of ours.
	f.now = start.Add(5 * time.Minute)
	future := f.issue(t, TokenSpec{})
	f.now = start
	f.mustFail(t, future, "service account token is not valid yet")
}

func TestServiceAccountRecreatedInvalidates(t *testing.T) {
	f := newFixture(t, ecKey(t))
	tok := f.issue(t, TokenSpec{})
	f.getter.sas["team/builder"] = &corev1.ServiceAccount{ObjectMeta: meta("team", "builder", "new-uid")}
	f.mustFail(t, tok, "service account UID (new-uid) does not match claim (sa-uid)")
	delete(f.getter.sas, "team/builder")
	f.mustFail(t, tok, `serviceaccounts "builder" not found`)
}

func TestBoundPodGoneOrDeletingInvalidates(t *testing.T) {
	f := newFixture(t, ecKey(t))
	tok := f.issue(t, TokenSpec{Pod: f.pod})

	// Deleting gracefully: the containers still run until deletionTimestamp (and a
	// minute of leeway), and their token works.
	deleting := f.pod.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: f.now.Add(30 * time.Second)}
	f.getter.pods["team/web"] = deleting
	if _, ok, err := f.authenticate(t, context.Background(), tok); !ok || err != nil {
		t.Errorf("pod in its grace period: %v, %v", ok, err)
	}
	// Past its deletion time by more than the leeway: invalid.
	deleting.DeletionTimestamp = &metav1.Time{Time: f.now.Add(-2 * time.Minute)}
	f.mustFail(t, tok, "service account token has been invalidated")

	// Gone.
	delete(f.getter.pods, "team/web")
	f.mustFail(t, tok, "service account token has been invalidated")

	// Another pod of the same name.
	f.getter.pods["team/web"] = &corev1.Pod{ObjectMeta: meta("team", "web", "other-pod-uid")}
	f.mustFail(t, tok, "pod UID (other-pod-uid) does not match service account pod ref claim (pod-uid)")
}

func TestBoundSecretAndNode(t *testing.T) {
	f := newFixture(t, ecKey(t))
	secretTok := f.issue(t, TokenSpec{Secret: f.secret})
	resp, ok, err := f.authenticate(t, context.Background(), secretTok)
	if !ok || err != nil {
		t.Fatalf("secret-bound: %v, %v", ok, err)
	}
	if _, has := resp.User.GetExtra()["authentication.kubernetes.io/pod-name"]; has {
		t.Errorf("a secret-bound token names a pod: %v", resp.User.GetExtra())
	}
	delete(f.getter.secrets, "team/bound")
	f.mustFail(t, secretTok, "service account token has been invalidated")

	nodeTok := f.issue(t, TokenSpec{Node: f.node})
	resp, ok, err = f.authenticate(t, context.Background(), nodeTok)
	if !ok || err != nil || resp.User.GetExtra()["authentication.kubernetes.io/node-uid"][0] != "node-uid" {
		t.Fatalf("node-bound: %v, %v, %v", resp, ok, err)
	}
	f.getter.nodes["node-1"] = &corev1.Node{ObjectMeta: meta("", "node-1", "another")}
	f.mustFail(t, nodeTok, "node UID (another) does not match service account node ref claim (node-uid)")

	if _, _, err := f.issuer.Issue(TokenSpec{ServiceAccount: f.sa, Secret: f.secret, Pod: f.pod, Expiration: time.Hour}); err == nil {
		t.Error("a token bound to a secret and a pod was issued")
	}
}

func TestConfigsAreChecked(t *testing.T) {
	if _, err := NewIssuer(IssuerConfig{}); err == nil {
		t.Error("an issuer without a key")
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewIssuer(IssuerConfig{Key: p384}); err == nil || !strings.Contains(err.Error(), "P-384") {
		t.Errorf("a P-384 key: %v", err)
	}
	if _, err := NewAuthenticator(AuthenticatorConfig{}, &fakeGetter{}); err == nil {
		t.Error("an authenticator without keys")
	}
	if _, err := NewAuthenticator(AuthenticatorConfig{Keys: []crypto.PublicKey{ecKey(t).Public()}}, nil); err == nil {
		t.Error("an authenticator without a getter")
	}
	f := newFixture(t, ecKey(t))
	if _, _, err := f.issuer.Issue(TokenSpec{ServiceAccount: f.sa}); err == nil {
		t.Error("a token without an expiration")
	}
}

func BenchmarkAuthenticatePodBoundToken(b *testing.B) {
	f := newFixture(b, ecKey(b))
	tok := f.issue(b, TokenSpec{Pod: f.pod, Node: f.node})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := f.authn.AuthenticateToken(ctx, tok); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
