package testutil

import (
	"context"
	"errors"
	"testing"
	"time"
)

// NoWait is the ready condition of a component whose readiness Start does not wait for:
// the test waits for what the component does instead.
var NoWait func() bool

// Start runs run(ctx) in a goroutine until the test ends, then cancels ctx and waits for
// run to return, failing t if it returned an error other than the cancellation. If run
// returns while the test still runs, the error is reported when the test ends. ready,
// when not nil, is polled with Eventually (up to timeout) before Start returns; a run
// that ends before it is ready fails t at once.
func Start[C Condition](t testing.TB, name string, timeout time.Duration, run func(ctx context.Context) error, ready C) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var result error
	finished := false
	t.Cleanup(func() {
		cancel()
		if !finished {
			result = <-done
		}
		if result != nil && !errors.Is(result, context.Canceled) {
			t.Errorf("%s stopped with: %v", name, result)
		}
	})
	if isNil(ready) {
		return
	}
	EventuallyWithin(t, timeout, name+" to be ready", func() error {
		select {
		case result = <-done:
			finished = true
			t.Fatalf("%s ended before it was ready: %v", name, result)
		default:
		}
		return check(ready)
	})
}

// isNil says whether cond is a nil function of any of the Condition types.
func isNil[C Condition](cond C) bool {
	switch c := any(cond).(type) {
	case func() bool:
		return c == nil
	case func() (bool, error):
		return c == nil
	case func() error:
		return c == nil
	}
	return false
}
