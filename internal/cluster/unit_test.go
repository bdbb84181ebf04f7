package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubelab/kubelab/internal/testutil"
)

// A unit runs its component, stops and starts it on request (a fresh run each time),
// and refuses requests once the cluster has stopped.
func TestUnitStopStart(t *testing.T) {
	var starts, running atomic.Int32
	u := newUnit("c", slog.Default(), func(ctx context.Context) error {
		starts.Add(1)
		running.Add(1)
		defer running.Add(-1)
		<-ctx.Done()
		return ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- u.supervise(ctx) }()
	bg := context.Background()
	if err := u.send(bg, false); err != nil {
		t.Fatal(err)
	}
	if n := running.Load(); n != 0 {
		t.Fatalf("%d runs after Stop, want 0", n)
	}
	if err := u.send(bg, true); err != nil {
		t.Fatal(err)
	}
	if err := u.send(bg, true); err != nil { // already running: nothing happens
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 5*time.Second, "two starts, one run", func() error {
		if starts.Load() != 2 || running.Load() != 1 {
			return fmt.Errorf("starts %d running %d, want 2 and 1", starts.Load(), running.Load())
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("supervise after the cluster stopped: %v", err)
	}
	if err := u.send(bg, true); !errors.Is(err, errClusterStopped) {
		t.Fatalf("Start after the cluster stopped: %v, want %v", err, errClusterStopped)
	}
}

// A component that returns on its own ends the supervisor with its error.
func TestUnitFailureEndsCluster(t *testing.T) {
	boom := errors.New("boom")
	u := newUnit("c", slog.Default(), func(ctx context.Context) error { return boom })
	if err := u.supervise(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("supervise = %v, want %v", err, boom)
	}
	u = newUnit("c", slog.Default(), func(ctx context.Context) error { return nil })
	if err := u.supervise(context.Background()); err == nil {
		t.Fatal("a component that returned nil while it should run was not an error")
	}
}
