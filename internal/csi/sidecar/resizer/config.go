package resizer

import (
	"fmt"
	"log/slog"
	"time"
)

// Config tunes the resizer.
type Config struct {
	// DriverName, when set, must be the name the driver reports.
	DriverName string
	// Workers is the number of claims handled at once (default 4).
	Workers int
	// Timeout bounds each CSI call (default 5m: a cloud resize takes a while).
	Timeout time.Duration
	// RetryIntervalStart and RetryIntervalMax bound the backoff of failed resizes
	// (defaults 1s and 5m).
	RetryIntervalStart, RetryIntervalMax time.Duration
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("resizer: workers %d < 0", c.Workers)
	}
	if c.Timeout < 0 || c.RetryIntervalStart < 0 || c.RetryIntervalMax < 0 {
		return fmt.Errorf("resizer: timeout and retry intervals must not be negative")
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.Timeout == 0 {
		c.Timeout = 5 * time.Minute
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
