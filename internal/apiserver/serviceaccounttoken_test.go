package apiserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// tokenClient is a client of s that presents token and nothing else.
func tokenClient(t *testing.T, s *apiservertest.Server, token string) kubernetes.Interface {
	t.Helper()
	cfg := &rest.Config{Host: s.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{
		CAFile: s.Config.CAFile, CAData: s.Config.CAData}}
	return kubernetes.NewForConfigOrDie(cfg)
}

// authenticatesAs says whether the API server takes token for user: a request with it is
// answered, or refused by authorization naming the user, rather than refused as
// unauthenticated (401).
func authenticatesAs(t *testing.T, s *apiservertest.Server, token, user string) error {
	t.Helper()
	_, err := tokenClient(t, s, token).CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{})
	if err == nil || apierrors.IsForbidden(err) && strings.Contains(err.Error(), `User "`+user+`"`) {
		return nil
	}
	return err
}

// claimsOf decodes the payload of a JWT without checking it.
func claimsOf(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", token)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func waitForServiceAccount(t *testing.T, c kubernetes.Interface, ns, name string) *corev1.ServiceAccount {
	t.Helper()
	var sa *corev1.ServiceAccount
	testutil.EventuallyWithin(t, waitTimeout, "service account "+ns+"/"+name, func() bool {
		var err error
		sa, err = c.CoreV1().ServiceAccounts(ns).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil
	})
	return sa
}

// `kubectl create token` gets a token that authenticates as the service account; one
// bound to a pod stops working once the pod is gone.
func TestKubectlCreateToken(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	k := newKubectl(t, s.Kubeconfig)
	ctx := context.Background()
	sa := waitForServiceAccount(t, s.Client, "default", "default")

	token := strings.TrimSpace(k.run("create", "token", "default"))
	c := claimsOf(t, token)
	if c["iss"] != "https://kubernetes.default.svc.cluster.local" || c["sub"] != "system:serviceaccount:default:default" {
		t.Errorf("claims %v", c)
	}
	if exp, iat := c["exp"].(float64), c["iat"].(float64); exp-iat != 3600 {
		t.Errorf("lifetime %v s, want the default 3600", exp-iat)
	}
	priv, _ := c["kubernetes.io"].(map[string]any)
	if ref, _ := priv["serviceaccount"].(map[string]any); ref["uid"] != string(sa.UID) {
		t.Errorf("kubernetes.io claim %v, want the account's uid %s", priv, sa.UID)
	}
	if err := authenticatesAs(t, s, token, "system:serviceaccount:default:default"); err != nil {
		t.Fatalf("the token does not authenticate: %v", err)
	}
	if err := authenticatesAs(t, s, token[:len(token)-4]+"AAAA", "system:serviceaccount:default:default"); !apierrors.IsUnauthorized(err) {
		t.Errorf("a token with a broken signature: %v, want 401", err)
	}
	if out := k.run("create", "token", "default", "--duration", "20m"); true {
		c := claimsOf(t, strings.TrimSpace(out))
		if exp, iat := c["exp"].(float64), c["iat"].(float64); exp-iat != 1200 {
			t.Errorf("--duration 20m gave %v s", exp-iat)
		}
	}

	pod, err := s.Client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bound"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bound := strings.TrimSpace(k.run("create", "token", "default", "--bound-object-kind", "Pod",
		"--bound-object-name", pod.Name, "--bound-object-uid", string(pod.UID)))
	priv, _ = claimsOf(t, bound)["kubernetes.io"].(map[string]any)
	if ref, _ := priv["pod"].(map[string]any); ref["name"] != "bound" || ref["uid"] != string(pod.UID) {
		t.Errorf("pod claim %v", priv)
	}
	if err := authenticatesAs(t, s, bound, "system:serviceaccount:default:default"); err != nil {
		t.Fatalf("the pod-bound token does not authenticate: %v", err)
	}
	if err := s.Client.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, waitTimeout, "the pod-bound token to be refused", func() (bool, error) {
		err := authenticatesAs(t, s, bound, "system:serviceaccount:default:default")
		return apierrors.IsUnauthorized(err), err
	})
	// The unbound token is not affected.
	if err := authenticatesAs(t, s, token, "system:serviceaccount:default:default"); err != nil {
		t.Errorf("the unbound token after the pod went: %v", err)
	}

	// A wrong uid is a conflict, and kubectl says so.
	out, err := k.cmd(ctx, "create", "token", "default", "--bound-object-kind", "Secret", "--bound-object-name", "nope").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `secrets "nope" not found`) {
		t.Errorf("a token bound to a missing secret: %v\n%s", err, out)
	}
}

// The TokenRequest API's rules: defaults, limits, bound objects, audiences, and the
// service account's identity.
func TestTokenRequest(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	ns := "tokens"
	if _, err := s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sas := s.Client.CoreV1().ServiceAccounts(ns)
	builder, err := sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	request := func(name string, spec authenticationv1.TokenRequestSpec) (*authenticationv1.TokenRequest, error) {
		return sas.CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	}

	before := time.Now().Truncate(time.Second)
	tr, err := request("builder", authenticationv1.TokenRequestSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Name != "builder" || tr.Namespace != ns || len(tr.Spec.Audiences) != 1 || tr.Spec.Audiences[0] != "https://kubernetes.default.svc.cluster.local" ||
		tr.Spec.ExpirationSeconds == nil || *tr.Spec.ExpirationSeconds != 3600 {
		t.Errorf("defaulted request %+v", tr)
	}
	if exp := tr.Status.ExpirationTimestamp.Time; exp.Before(before.Add(time.Hour)) || exp.After(time.Now().Add(time.Hour)) {
		t.Errorf("status.expirationTimestamp %v, want an hour from now", exp)
	}
	if err := authenticatesAs(t, s, tr.Status.Token, "system:serviceaccount:tokens:builder"); err != nil {
		t.Errorf("token: %v", err)
	}

	// Limits.
	if _, err := request("builder", authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](599)}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes") {
		t.Errorf("599 s: %v", err)
	}
	if _, err := request("builder", authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](1<<32 + 1)}); !apierrors.IsInvalid(err) {
		t.Errorf("2^32+1 s: %v", err)
	}
	if _, err := request("nobody", authenticationv1.TokenRequestSpec{}); !apierrors.IsNotFound(err) {
		t.Errorf("a missing service account: %v", err)
	}

	// Another audience: the token is not for the API server.
	vault, err := request("builder", authenticationv1.TokenRequestSpec{Audiences: []string{"vault"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := authenticatesAs(t, s, vault.Status.Token, "system:serviceaccount:tokens:builder"); !apierrors.IsUnauthorized(err) {
		t.Errorf("a token for vault at the API server: %v, want 401", err)
	}

	// Bound objects.
	pod, err := s.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.PodSpec{ServiceAccountName: "builder", NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	podRef := &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "web", UID: pod.UID}
	// The kubelet's request: 3607 s for the API server, bound to the pod.
	kubelets, err := request("builder", authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3607), BoundObjectRef: podRef})
	if err != nil {
		t.Fatal(err)
	}
	c := claimsOf(t, kubelets.Status.Token)
	priv, _ := c["kubernetes.io"].(map[string]any)
	iat := c["iat"].(float64)
	if c["exp"].(float64)-iat != 365*24*3600 || priv["warnafter"].(float64)-iat != 3607 {
		t.Errorf("the kubelet's token: exp-iat %v, warnafter-iat %v; want a year and 3607", c["exp"].(float64)-iat, priv["warnafter"])
	}
	if node, _ := priv["node"].(map[string]any); node["name"] != "node-a" {
		t.Errorf("a pod on node-a: node claim %v", priv["node"])
	}
	if d := time.Until(kubelets.Status.ExpirationTimestamp.Time); d > 3607*time.Second || d < 3500*time.Second {
		t.Errorf("status.expirationTimestamp in %v, want 3607 s (what was asked)", d)
	}
	if err := authenticatesAs(t, s, kubelets.Status.Token, "system:serviceaccount:tokens:builder"); err != nil {
		t.Errorf("the kubelet's token: %v", err)
	}
	if _, err := request("builder", authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{
		Kind: "Pod", APIVersion: "v1", Name: "web", UID: types.UID("not-the-uid")}}); !apierrors.IsConflict(err) {
		t.Errorf("a wrong pod uid: %v, want 409", err)
	}
	if _, err := request("default", authenticationv1.TokenRequestSpec{BoundObjectRef: podRef}); !apierrors.IsBadRequest(err) ||
		!strings.Contains(err.Error(), "cannot bind token for serviceaccount \"default\" to pod running with different serviceaccount name.") {
		t.Errorf("a pod of another account: %v", err)
	}
	if _, err := request("builder", authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{
		Kind: "ConfigMap", APIVersion: "v1", Name: "x"}}); !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "cannot bind token to object of type /v1, Kind=ConfigMap") {
		t.Errorf("a ConfigMap: %v", err)
	}
	secret, err := s.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bound"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secretTok, err := request("builder", authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{
		Kind: "Secret", APIVersion: "v1", Name: "bound", UID: secret.UID}})
	if err != nil {
		t.Fatal(err)
	}
	if err := authenticatesAs(t, s, secretTok.Status.Token, "system:serviceaccount:tokens:builder"); err != nil {
		t.Errorf("the secret-bound token: %v", err)
	}
	if err := s.Client.CoreV1().Secrets(ns).Delete(ctx, "bound", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, waitTimeout, "the secret-bound token to be refused", func() bool {
		return apierrors.IsUnauthorized(authenticatesAs(t, s, secretTok.Status.Token, "system:serviceaccount:tokens:builder"))
	})

	// The account deleted and made again: its old tokens are refused (another uid).
	if err := sas.Delete(ctx, "builder", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	again, err := sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.UID == builder.UID {
		t.Fatal("the recreated account kept its uid")
	}
	testutil.EventuallyWithin(t, waitTimeout, "the old account's token to be refused", func() bool {
		return apierrors.IsUnauthorized(authenticatesAs(t, s, tr.Status.Token, "system:serviceaccount:tokens:builder"))
	})
}

// Pods get the token volume, and no pod runs as an account that does not exist.
func TestServiceAccountAdmission(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	waitForServiceAccount(t, s.Client, "default", "default")
	pods := s.Client.CoreV1().Pods("default")
	newPod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
			Containers:     []corev1.Container{{Name: "c", Image: "busybox"}}}}
	}
	pod, err := pods.Create(ctx, newPod("mounted"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.Volumes) != 1 || !strings.HasPrefix(pod.Spec.Volumes[0].Name, "kube-api-access-") || pod.Spec.Volumes[0].Projected == nil ||
		len(pod.Spec.Volumes[0].Projected.Sources) != 3 {
		t.Fatalf("volumes %+v", pod.Spec.Volumes)
	}
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/var/run/secrets/kubernetes.io/serviceaccount" || !c.VolumeMounts[0].ReadOnly {
			t.Errorf("container %s mounts %+v", c.Name, c.VolumeMounts)
		}
	}

	off := newPod("unmounted")
	off.Spec.AutomountServiceAccountToken = ptr.To(false)
	if pod, err = pods.Create(ctx, off, metav1.CreateOptions{}); err != nil || len(pod.Spec.Volumes) != 0 {
		t.Errorf("automount false: %v, volumes %+v", err, pod.Spec.Volumes)
	}

	missing := newPod("orphan")
	missing.Spec.ServiceAccountName = "ghost"
	_, err = pods.Create(ctx, missing, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `error looking up service account default/ghost: serviceaccount "ghost" not found`) {
		t.Errorf("a missing account: %v", err)
	}
}

// A service account's token, reviewed (TokenReview) or presented (SelfSubjectReview),
// is the account's user in the groups system:serviceaccounts,
// system:serviceaccounts:<namespace> and system:authenticated.
func TestTokenReviewGroups(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	sa := waitForServiceAccount(t, s.Client, "default", "default")
	tr, err := s.Client.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantGroups := []string{"system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"}

	review, err := s.Client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: tr.Status.Token}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !review.Status.Authenticated || review.Status.Error != "" || review.Status.User.Username != "system:serviceaccount:default:default" {
		t.Fatalf("review %+v", review.Status)
	}
	if got := review.Status.User.Groups; !slices.Equal(got, wantGroups) {
		t.Errorf("TokenReview groups %q, want %q", got, wantGroups)
	}

	self, err := tokenClient(t, s, tr.Status.Token).AuthenticationV1().SelfSubjectReviews().Create(ctx,
		&authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := self.Status.UserInfo.Groups; !slices.Equal(got, wantGroups) {
		t.Errorf("SelfSubjectReview groups %q, want %q", got, wantGroups)
	}

	bad, err := s.Client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: "not-a-token"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if bad.Status.Authenticated || bad.Status.Error == "" || len(bad.Status.User.Groups) != 0 {
		t.Errorf("a bad token's review %+v, want unauthenticated with an error", bad.Status)
	}
	if _, err := s.Client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{}, metav1.CreateOptions{}); !apierrors.IsBadRequest(err) {
		t.Errorf("a review without a token: %v, want 400", err)
	}
}

// A service account reads the issuer's OpenID Connect discovery document and key set,
// and the key the document leads to verifies its token.
func TestOpenIDDiscovery(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	sa := waitForServiceAccount(t, s.Client, "default", "default")
	tr, err := s.Client.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (map[string]any, string) {
		t.Helper()
		res := tokenClient(t, s, tr.Status.Token).Discovery().RESTClient().Get().AbsPath(path).Do(ctx)
		raw, err := res.Raw()
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		var contentType string
		res.ContentType(&contentType)
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, raw)
		}
		return m, contentType
	}
	doc, contentType := get("/.well-known/openid-configuration")
	jwksURI, _ := doc["jwks_uri"].(string)
	if doc["issuer"] != "https://kubernetes.default.svc.cluster.local" || jwksURI != s.URL+"/openid/v1/jwks" ||
		contentType != "application/json" || fmt.Sprint(doc["id_token_signing_alg_values_supported"]) != "[ES256]" {
		t.Errorf("discovery document (%s): %v", contentType, doc)
	}
	set, contentType := get(strings.TrimPrefix(jwksURI, s.URL))
	keys, _ := set["keys"].([]any)
	if contentType != "application/jwk-set+json" || len(keys) != 1 {
		t.Fatalf("key set (%s): %v", contentType, set)
	}
	jwk := keys[0].(map[string]any)
	x, y := unbase64url(t, jwk["x"].(string)), unbase64url(t, jwk["y"].(string))
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tr.Status.Token, ".")
	var header map[string]any
	if b, err := base64.RawURLEncoding.DecodeString(parts[0]); err != nil || json.Unmarshal(b, &header) != nil || header["kid"] != jwk["kid"] {
		t.Errorf("token header %v (%v), want kid %v", header, err, jwk["kid"])
	}
	sig := unbase64url(t, parts[2])
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	r, ss := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
	if !ecdsa.Verify(pub, digest[:], r, ss) {
		t.Error("the published key does not verify the token")
	}
}

// unbase64url decodes unpadded base64url.
func unbase64url(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
