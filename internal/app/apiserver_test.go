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

// TestUpGCPercent: a hollow `kubelab up` collects at Go's 100 unless --gc-percent or GOGC
// says otherwise; real clusters keep the API server's default (0 here).
func TestUpGCPercent(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	gogc := func(k string) (string, bool) { return "200", k == "GOGC" }
	for _, tc := range []struct {
		hollow bool
		flag   int
		getenv func(string) (string, bool)
		want   int
	}{
		{true, 0, none, hollowGCPercent},
		{true, 0, gogc, 0},
		{true, 300, none, 300},
		{false, 0, none, 0},
		{false, 250, none, 250},
	} {
		if got := upGCPercent(tc.hollow, tc.flag, tc.getenv); got != tc.want {
			t.Errorf("upGCPercent(hollow %v, flag %d) = %d, want %d", tc.hollow, tc.flag, got, tc.want)
		}
	}
}
