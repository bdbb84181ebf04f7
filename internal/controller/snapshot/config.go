package snapshot

import (
	"fmt"
	"log/slog"
	"time"
)

// Config tunes the snapshot controller.
type Config struct {
	// Workers is the number of objects handled at once (default 4).
	Workers int
	// RetryIntervalStart and RetryIntervalMax bound the backoff (1s and 5m).
	RetryIntervalStart, RetryIntervalMax time.Duration
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("snapshot controller: workers %d < 0", c.Workers)
	}
	if c.RetryIntervalStart < 0 || c.RetryIntervalMax < 0 {
		return fmt.Errorf("snapshot controller: durations must not be negative")
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Workers == 0 {
		c.Workers = 4
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
