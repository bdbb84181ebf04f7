package apiserver_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/controller/namespace"
)

func startNamespaceController(ctx context.Context, t *testing.T, s *apiservertest.Server) {
	t.Helper()
	c, err := namespace.New(namespace.Config{Recheck: 200 * time.Millisecond}, kubernetes.NewForConfigOrDie(s.Config), metadata.NewForConfigOrDie(s.Config))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(ctx)
	go func() { defer close(done); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// waitFor polls cond for up to a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitForDescribed(t, what, cond, func() string { return "" })
}

// waitForDescribed polls cond for up to a minute and says describe() when it gives up.
func waitForDescribed(t *testing.T, what string, cond func() bool, describe func() string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s %s", what, describe())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
