package testutil

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// DefaultTimeout is how long Eventually waits.
const DefaultTimeout = 30 * time.Second

// interval is how often Eventually and Consistently check their condition.
const interval = 50 * time.Millisecond

// Condition is a check a test polls: a bool, a bool with the error that says why not
// (an error does not end the wait), or an error alone (nil when it holds).
type Condition interface {
	func() bool | func() (bool, error) | func() error
}

// errNotYet is what a bool condition that does not hold reports.
var errNotYet = errors.New("condition not met")

// check evaluates cond once: nil when it holds, else why not.
func check[C Condition](cond C) error {
	switch c := any(cond).(type) {
	case func() bool:
		if !c() {
			return errNotYet
		}
		return nil
	case func() (bool, error):
		ok, err := c()
		if ok {
			return nil
		}
		if err == nil {
			err = errNotYet
		}
		return err
	case func() error:
		return c()
	}
	panic(fmt.Sprintf("testutil: unknown condition type %T", cond))
}

// Eventually polls cond until it holds, for up to DefaultTimeout, and fails t naming
// what and the last reason cond gave if it never does.
func Eventually[C Condition](t testing.TB, what string, cond C) {
	t.Helper()
	EventuallyWithin(t, DefaultTimeout, what, cond)
}

// EventuallyWithin is Eventually with a timeout of its own.
func EventuallyWithin[C Condition](t testing.TB, timeout time.Duration, what string, cond C) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), interval, timeout, true, func(context.Context) (bool, error) {
		last = check(cond)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("waiting %s for %s: %v", timeout, what, last)
	}
}

// Consistently checks cond throughout window and fails t, naming what and why, the
// first time it does not hold. It is how a test says that something did not happen
// when no event proves it: the condition is held over the window, not read once after
// a sleep.
func Consistently[C Condition](t testing.TB, window time.Duration, what string, cond C) {
	t.Helper()
	deadline := time.Now().Add(window)
	for {
		if err := check(cond); err != nil {
			t.Fatalf("%s stopped holding: %v", what, err)
		}
		if !time.Now().Before(deadline) {
			return
		}
		time.Sleep(min(interval, time.Until(deadline)))
	}
}
