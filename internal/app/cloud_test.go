package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// syncBuffer is the tests' buffer for output written while they read it.
type syncBuffer = apiservertest.SyncBuffer

// TestCloudCommand runs `kubelab cloud --hollow` and checks that it prints its endpoint,
// region and the client files, and that those files exist.
func TestCloudCommand(t *testing.T) {
	dir := t.TempDir()
	t.Run("runs", func(t *testing.T) {
		var out, errOut syncBuffer
		testutil.Start(t, "kubelab cloud", 10*time.Second, func(ctx context.Context) error {
			if err := Run(ctx, []string{"cloud", "--hollow", "--data-dir", dir, "--zones", "us-east-1a,us-east-1b"}, &out, &errOut); err != nil {
				return fmt.Errorf("%w\nstderr:\n%s", err, errOut.String())
			}
			return nil
		}, func() bool { return strings.Contains(out.String(), "credentials:") })
		endpoint, _ := os.ReadFile(filepath.Join(dir, "endpoint"))
		for _, want := range []string{"endpoint:    " + strings.TrimSpace(string(endpoint)), "region:      us-east-1",
			filepath.Join(dir, "aws-config"), filepath.Join(dir, "aws-credentials")} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
		creds, err := os.ReadFile(filepath.Join(dir, "aws-credentials"))
		if err != nil || !strings.Contains(string(creds), "aws_access_key_id = AKIA") {
			t.Errorf("credentials file: %q %v", creds, err)
		}
	})
	var out, errOut syncBuffer
	if err := Run(context.Background(), []string{"cloud", "--hollow", "--data-dir", dir, "--profile", "turbo"}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "turbo") {
		t.Errorf("bad profile: %v", err)
	}
}
