package apiserver

import (
	"errors"
	"strings"
	"testing"
)

// The issuers and the JWKS URI are checked as kube-apiserver checks its flags.
func TestValidateServiceAccountIssuers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		issuers []string
		jwks    string
		want    string // a part of the error; "" for none
	}{
		{name: "default", issuers: []string{"https://kubernetes.default.svc.cluster.local"}},
		{name: "two", issuers: []string{"https://172.31.0.2", "https://kubernetes.default.svc.cluster.local"}, jwks: "https://172.31.0.2/openid/v1/jwks"},
		{name: "not a URL", issuers: []string{"kubelab"}},
		{name: "twice", issuers: []string{"https://a", "https://a"}, want: `"https://a" is already specified`},
		{name: "empty", issuers: []string{""}, want: "must not be empty"},
		{name: "bad URL", issuers: []string{"https://a b:%zz"}, want: "contained a ':' but was not a valid URL"},
		{name: "http jwks", issuers: []string{"https://a"}, jwks: "http://a/keys", want: "requires https scheme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := errors.Join(validateServiceAccountIssuers(tc.issuers, tc.jwks)...)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("validate(%q, %q) = %v, want %q", tc.issuers, tc.jwks, err, tc.want)
			}
		})
	}
}

// Discovery is served only for an https issuer without query or fragment.
func TestDiscoverableIssuer(t *testing.T) {
	for issuer, ok := range map[string]bool{
		"https://kubernetes.default.svc.cluster.local": true,
		"https://172.31.0.2:443":                       true,
		"https://oidc.example.com/id/ABC":              true,
		"kubelab":                                      false,
		"http://172.31.0.2":                            false,
		"https://a/?x=1":                               false,
		"https://a/#f":                                 false,
	} {
		if err := discoverableIssuer(issuer); (err == nil) != ok {
			t.Errorf("discoverableIssuer(%q) = %v, want ok %v", issuer, err, ok)
		}
	}
}
