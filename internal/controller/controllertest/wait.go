package controllertest

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// WaitFor polls cond every 50ms for up to 30s and fails t, naming what and the last
// error cond returned, if it never holds. An error from cond does not end the wait.
func WaitFor(t testing.TB, what string, cond func() (bool, error)) {
	t.Helper()
	WaitWithin(t, 30*time.Second, what, cond)
}

// WaitWithin is WaitFor with a timeout of its own.
func WaitWithin(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	var last error
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, err := cond()
		last = err
		return ok, nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v (last error: %v)", what, err, last)
	}
}

// WaitNoError is WaitWithin for a check that says what is still wrong: it waits until
// check returns nil.
func WaitNoError(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	WaitWithin(t, timeout, what, func() (bool, error) { err := check(); return err == nil, err })
}
