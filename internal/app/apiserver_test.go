package app

import (
	"slices"
	"testing"

	"github.com/spf13/cobra"
)

// --service-account-issuer repeats (its values kept in order) and
// reaches the control plane's config with --service-account-jwks-uri.
func TestServiceAccountIssuerFlags(t *testing.T) {
	f := &controlPlaneFlags{}
	cmd := &cobra.Command{Use: "apiserver"}
	f.register(cmd)
	if err := cmd.ParseFlags([]string{"--service-account-issuer", "https://172.31.0.2",
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-jwks-uri", "https://172.31.0.2/openid/v1/jwks"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.config()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"https://172.31.0.2", "https://kubernetes.default.svc.cluster.local"}; !slices.Equal(cfg.ServiceAccountIssuers, want) ||
		cfg.ServiceAccountJWKSURI != "https://172.31.0.2/openid/v1/jwks" {
		t.Errorf("issuers %q, jwks uri %q", cfg.ServiceAccountIssuers, cfg.ServiceAccountJWKSURI)
	}
}
