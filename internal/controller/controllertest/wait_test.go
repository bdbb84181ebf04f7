package controllertest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that records Fatalf instead of ending the test.
type recorder struct {
	testing.TB
	fatal string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }

func TestWaitWithin(t *testing.T) {
	n := 0
	r := &recorder{TB: t}
	WaitWithin(r, 5*time.Second, "third call", func() (bool, error) { n++; return n == 3, errors.New("not yet") })
	if r.fatal != "" || n != 3 {
		t.Errorf("condition true on its third call: calls %d, fatal %q; want 3 calls, no failure", n, r.fatal)
	}

	r = &recorder{TB: t}
	WaitWithin(r, 200*time.Millisecond, "never", func() (bool, error) { return false, errors.New("still broken") })
	for _, want := range []string{"waiting for never", "still broken"} {
		if !strings.Contains(r.fatal, want) {
			t.Errorf("failure %q lacks %q", r.fatal, want)
		}
	}
}
