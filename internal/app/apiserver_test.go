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

// TestUpMemoryLimit: a hollow `kubelab up` gets a soft memory limit of half the machine
// unless --memory-limit or GOMEMLIMIT say otherwise; real clusters none (0 here).
func TestUpMemoryLimit(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	env := func(k string) (string, bool) { return "4GiB", k == "GOMEMLIMIT" }
	const machine = 24 << 30
	for _, tc := range []struct {
		hollow bool
		flag   int64
		getenv func(string) (string, bool)
		want   int64
	}{
		{true, 0, none, 12 << 30},
		{true, 0, env, 0},
		{true, 8 << 30, none, 8 << 30},
		{false, 0, none, 0},
		{false, 6 << 30, none, 6 << 30},
	} {
		if got := upMemoryLimit(tc.hollow, tc.flag, tc.getenv, machine); got != tc.want {
			t.Errorf("upMemoryLimit(hollow %v, flag %d) = %d, want %d", tc.hollow, tc.flag, got, tc.want)
		}
	}
	if machineMemory() <= 0 {
		t.Errorf("machine memory unread")
	}
}
