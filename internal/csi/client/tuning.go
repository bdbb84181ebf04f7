package client

import (
	"fmt"
	"log/slog"
	"time"
)

// Tuning is what every controller sidecar (attacher, provisioner, resizer) is tuned by: how
// many objects it handles at once, how long one CSI call may take, the backoff of failed
// objects and where its logs go. Each sidecar embeds it in its Config.
type Tuning struct {
	// Workers is the number of objects handled at once (default: the sidecar's).
	Workers int
	// Timeout bounds each CSI call (default: the sidecar's).
	Timeout time.Duration
	// RetryIntervalStart and RetryIntervalMax bound the backoff of failed objects
	// (defaults 1s and 5m, as upstream).
	RetryIntervalStart, RetryIntervalMax time.Duration
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

// Validate rejects negative workers or durations; component names the sidecar in the error.
func (t *Tuning) Validate(component string) error {
	if t.Workers < 0 {
		return fmt.Errorf("%s: workers %d < 0", component, t.Workers)
	}
	if t.Timeout < 0 || t.RetryIntervalStart < 0 || t.RetryIntervalMax < 0 {
		return fmt.Errorf("%s: timeout and retry intervals must not be negative", component)
	}
	return nil
}

// SetDefaults fills what is left zero: workers and timeout with the sidecar's defaults, the
// backoff with 1s and 5m, the logger with slog.Default().
func (t *Tuning) SetDefaults(workers int, timeout time.Duration) {
	if t.Workers == 0 {
		t.Workers = workers
	}
	if t.Timeout == 0 {
		t.Timeout = timeout
	}
	if t.RetryIntervalStart == 0 {
		t.RetryIntervalStart = time.Second
	}
	if t.RetryIntervalMax == 0 {
		t.RetryIntervalMax = 5 * time.Minute
	}
	if t.Logger == nil {
		t.Logger = slog.Default()
	}
}
