package controllertest

import (
	"testing"
	"time"

	"github.com/kubelab/kubelab/internal/testutil"
)

// WaitFor polls cond for up to 30s and fails t if it never holds.
//
// Deprecated: use testutil.Eventually.
func WaitFor(t testing.TB, what string, cond func() (bool, error)) {
	t.Helper()
	testutil.Eventually(t, what, cond)
}

// WaitWithin is WaitFor with a timeout of its own.
//
// Deprecated: use testutil.EventuallyWithin.
func WaitWithin(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	testutil.EventuallyWithin(t, timeout, what, cond)
}

// WaitNoError waits until check returns nil.
//
// Deprecated: use testutil.EventuallyWithin.
func WaitNoError(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	testutil.EventuallyWithin(t, timeout, what, check)
}
