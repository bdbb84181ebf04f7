package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

// syncBuffer is the tests' buffer for output written while they read it.
type syncBuffer = apiservertest.SyncBuffer

// TestCloudCommand runs `kubelab cloud --hollow` and checks that it prints its endpoint,
// region and the client files, and that those files exist.
func TestCloudCommand(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"cloud", "--hollow", "--data-dir", dir, "--zones", "us-east-1a,us-east-1b"}, &out, &errOut)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "credentials:") {
		if time.Now().After(deadline) {
			t.Fatalf("no output after 10s; stderr:\n%s", errOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
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
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("cloud command: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cloud command did not stop")
	}
	if err := Run(context.Background(), []string{"cloud", "--hollow", "--data-dir", dir, "--profile", "turbo"}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "turbo") {
		t.Errorf("bad profile: %v", err)
	}
}
