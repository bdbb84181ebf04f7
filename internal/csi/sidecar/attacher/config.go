package attacher

import (
	"fmt"
	"log/slog"
	"time"
)

// Config tunes the attacher.
type Config struct {
	// DriverName, when set, must be the name the driver reports.
	DriverName string
	// Workers is the number of attachments handled at once (default 10).
	Workers int
	// Timeout bounds each CSI call (default 60s).
	Timeout time.Duration
	// RetryIntervalStart and RetryIntervalMax bound the backoff of failed
	// attachments (defaults 1s and 5m).
	RetryIntervalStart, RetryIntervalMax time.Duration
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("attacher: workers %d < 0", c.Workers)
	}
	if c.Timeout < 0 || c.RetryIntervalStart < 0 || c.RetryIntervalMax < 0 {
		return fmt.Errorf("attacher: timeout and retry intervals must not be negative")
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Workers == 0 {
		c.Workers = 10
	}
	if c.Timeout == 0 {
		c.Timeout = 60 * time.Second
	}
	if c.RetryIntervalStart == 0 {
		c.RetryIntervalStart = time.Second
	}
	if c.RetryIntervalMax == 0 {
		c.RetryIntervalMax = 5 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}
