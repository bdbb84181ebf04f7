package apiserver_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/apiserver"
	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/apiserver/auth/serviceaccount"
	"github.com/kubelab/kubelab/internal/testutil"
)

// With --service-account-issuer set to the server's own URL and the old default kept as
// a second issuer: tokens carry the new iss; the discovery document, served at
// <issuer>/.well-known/openid-configuration, names exactly that issuer and a jwks_uri
// that answers; anonymous clients (a cloud's STS) read both once the role
// system:service-account-issuer-discovery is bound to system:unauthenticated, and not
// before; tokens of the old issuer still authenticate.
func TestServiceAccountIssuerURL(t *testing.T) {
	port := apiservertest.FreePort(t)
	issuer := fmt.Sprintf("https://127.0.0.1:%d", port)
	s := apiservertest.Start(t, apiservertest.Options{Port: port,
		ServiceAccountIssuers: []string{issuer, serviceaccount.DefaultIssuer}})
	ctx := context.Background()
	sa := waitForServiceAccount(t, s.Client, "default", "default")

	tr, err := s.Client.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"sts.amazonaws.com"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := jwtClaims(t, tr.Status.Token); c.Issuer != issuer || !slices.Equal(c.Audience, []string{"sts.amazonaws.com"}) {
		t.Errorf("token claims iss %q aud %q, want iss %q aud [sts.amazonaws.com]", c.Issuer, c.Audience, issuer)
	}
	// A token without audiences is for the API server: all its issuers.
	apiTok, err := s.Client.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := jwtClaims(t, apiTok.Status.Token); !slices.Equal(c.Audience, []string{issuer, serviceaccount.DefaultIssuer}) {
		t.Errorf("API token aud %q, want both issuers", c.Audience)
	}

	anon := anonymousClient(t, s)
	discovery := issuer + serviceaccount.OpenIDConfigurationPath
	if code, body := anonGet(t, anon, discovery); code != http.StatusForbidden {
		t.Errorf("anonymous GET %s before the binding: %d %s, want 403", discovery, code, body)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-oidc-unauthenticated-" + strings.ToLower(t.Name())},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:service-account-issuer-discovery"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:unauthenticated"}},
	}
	if _, err := s.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	var body []byte
	testutil.EventuallyWithin(t, waitTimeout, "anonymous discovery allowed", func() bool {
		var code int
		code, body = anonGet(t, anon, discovery)
		return code == http.StatusOK
	})
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("discovery document: %v\n%s", err, body)
	}
	if doc.Issuer != issuer || doc.JWKSURI != issuer+serviceaccount.JWKSPath {
		t.Errorf("discovery document %s, want issuer %q and its jwks_uri", body, issuer)
	}
	code, keys := anonGet(t, anon, doc.JWKSURI)
	if code != http.StatusOK || !strings.Contains(string(keys), `"kid"`) {
		t.Errorf("anonymous GET %s: %d %s", doc.JWKSURI, code, keys)
	}
	// The binding opens only the discovery paths.
	if code, _ := anonGet(t, anon, issuer+"/api"); code != http.StatusUnauthorized {
		t.Errorf("anonymous GET /api: %d, want 401", code)
	}

	// A token of the old issuer, signed with the same key, as pods of a data dir made
	// before the upgrade hold.
	key, err := serviceaccount.LoadSigningKey(apiserver.PKI{Dir: filepath.Join(s.DataDir, "pki")}.ServiceAccountKey())
	if err != nil {
		t.Fatal(err)
	}
	old, err := serviceaccount.NewIssuer(serviceaccount.IssuerConfig{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	oldTok, _, err := old.Issue(serviceaccount.TokenSpec{ServiceAccount: sa, Expiration: time.Hour,
		Audiences: []string{serviceaccount.DefaultIssuer}})
	if err != nil {
		t.Fatal(err)
	}
	if err := authenticatesAs(t, s, oldTok, "system:serviceaccount:default:default"); err != nil {
		t.Errorf("a token of the old issuer: %v", err)
	}
}

// The document's jwks_uri is the one given (--service-account-jwks-uri), else the key
// set's path at the advertised address (its port unnamed when it is https's own).
func TestServiceAccountJWKSURI(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts apiservertest.Options
		want string
	}{
		{"given", apiservertest.Options{ServiceAccountJWKSURI: "https://oidc.example.com/keys", AdvertiseAddress: "172.31.0.2"},
			"https://oidc.example.com/keys"},
		{"advertised on 443", apiservertest.Options{AdvertiseAddress: "172.31.0.2", AdvertisePort: 443},
			"https://172.31.0.2/openid/v1/jwks"},
		{"advertised on 6443", apiservertest.Options{AdvertiseAddress: "172.31.0.2", AdvertisePort: 6443},
			"https://172.31.0.2:6443/openid/v1/jwks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := apiservertest.Start(t, tc.opts)
			raw, err := s.Client.Discovery().RESTClient().Get().AbsPath(serviceaccount.OpenIDConfigurationPath).DoRaw(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := json.Unmarshal(raw, &doc); err != nil {
				t.Fatal(err)
			}
			if doc["jwks_uri"] != tc.want || doc["issuer"] != serviceaccount.DefaultIssuer {
				t.Errorf("discovery document %s, want jwks_uri %s", raw, tc.want)
			}
		})
	}
}

type jwtClaimSet struct {
	Issuer   string   `json:"iss"`
	Audience []string `json:"aud"`
}

// jwtClaims decodes a JWT's payload without checking it.
func jwtClaims(t *testing.T, token string) jwtClaimSet {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", token)
	}
	var c jwtClaimSet
	if err := json.Unmarshal(unbase64url(t, parts[1]), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// anonymousClient trusts s's CA and presents no credentials.
func anonymousClient(t *testing.T, s *apiservertest.Server) *http.Client {
	t.Helper()
	caPEM := s.Config.CAData
	if len(caPEM) == 0 {
		var err error
		if caPEM, err = os.ReadFile(s.Config.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("no CA certificate in %q", base64.StdEncoding.EncodeToString(caPEM))
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func anonGet(t *testing.T, c *http.Client, url string) (int, []byte) {
	t.Helper()
	res, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return res.StatusCode, body
}
