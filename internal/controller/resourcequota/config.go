package resourcequota

import (
	"fmt"
	"log/slog"
	"time"
)

// Config tunes the controller.
type Config struct {
	// Workers is the number of quotas synced at once (default 2).
	Workers int
	// Resync is how often every quota is recomputed (default 5m), which also catches
	// usage freed without an event (a pod stuck terminating past its grace period).
	Resync time.Duration
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("resourcequota: workers %d < 0", c.Workers)
	}
	if c.Resync < 0 {
		return fmt.Errorf("resourcequota: resync %s < 0", c.Resync)
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Workers == 0 {
		c.Workers = 2
	}
	if c.Resync == 0 {
		c.Resync = 5 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}
