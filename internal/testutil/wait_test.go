package testutil

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that records a failure instead of ending the test.
type recorder struct {
	testing.TB
	failed  atomic.Bool
	message string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed.Store(true)
	r.message = format
	runtime.Goexit()
}

func (r *recorder) Errorf(format string, args ...any) { r.failed.Store(true); r.message = format }

// runAs runs f with a recorder in its own goroutine, as the testing package runs a test,
// so that Fatalf can end it.
func runAs(t *testing.T, f func(tb testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); f(r) }()
	<-done
	return r
}

func TestEventuallyTakesEachConditionShape(t *testing.T) {
	var n atomic.Int32
	Eventually(t, "bool", func() bool { return n.Add(1) > 2 })
	Eventually(t, "bool and error", func() (bool, error) { return n.Add(1) > 4, errors.New("not yet") })
	Eventually(t, "error", func() error {
		if n.Add(1) > 6 {
			return nil
		}
		return errors.New("not yet")
	})
}

func TestEventuallyFailsWhenTheConditionNeverHolds(t *testing.T) {
	r := runAs(t, func(tb testing.TB) {
		EventuallyWithin(tb, 200*time.Millisecond, "never", func() error { return errors.New("still wrong") })
	})
	if !r.failed.Load() {
		t.Fatal("EventuallyWithin did not fail on a condition that never held")
	}
}

func TestConsistentlyFailsWhenTheConditionStopsHolding(t *testing.T) {
	start := time.Now()
	r := runAs(t, func(tb testing.TB) {
		Consistently(tb, 5*time.Second, "young", func() bool { return time.Since(start) < 100*time.Millisecond })
	})
	if !r.failed.Load() {
		t.Fatal("Consistently did not fail when its condition stopped holding")
	}
	Consistently(t, 150*time.Millisecond, "always", func() bool { return true })
}

func TestStartReportsARunThatEndsBeforeItIsReady(t *testing.T) {
	r := runAs(t, func(tb testing.TB) {
		Start(tb, "broken", time.Second, func(context.Context) error { return errors.New("boom") }, func() bool { return false })
	})
	if !r.failed.Load() {
		t.Fatal("Start did not fail for a run that ended before it was ready")
	}
}

func TestStartWaitsUntilReadyAndStopsAtCleanup(t *testing.T) {
	var ready, stopped atomic.Bool
	t.Run("run", func(t *testing.T) {
		Start(t, "component", 5*time.Second, func(ctx context.Context) error {
			ready.Store(true)
			<-ctx.Done()
			stopped.Store(true)
			return ctx.Err()
		}, ready.Load)
		if stopped.Load() {
			t.Fatal("the component stopped before the test ended")
		}
	})
	if !stopped.Load() {
		t.Fatal("the component still runs after its test ended")
	}
}

func TestStartWithNoWaitReturnsAtOnce(t *testing.T) {
	release := make(chan struct{})
	var stopped atomic.Bool
	t.Run("run", func(t *testing.T) {
		Start(t, "component", time.Second, func(ctx context.Context) error {
			<-release // not ready until released: Start must not wait for it
			<-ctx.Done()
			stopped.Store(true)
			return nil
		}, NoWait)
		close(release)
	})
	if !stopped.Load() {
		t.Fatal("the component still runs after its test ended")
	}
}
