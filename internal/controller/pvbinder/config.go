package pvbinder

import (
	"fmt"
	"log/slog"
	"time"
)

// Component is the name the controller records Events under, as upstream.
const Component = "persistentvolume-controller"

// Config tunes the controller.
type Config struct {
	// Workers is the number of claims (and, separately, volumes) synced at once
	// (default 8: a bind is four writes in a row, and a burst of claims should not queue
	// behind a few of them).
	Workers int
	// Resync is how often every claim and volume is looked at again even without a
	// change (default 15s, as upstream's --pvclaimbinder-sync-period).
	Resync time.Duration
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("pvbinder: workers %d < 0", c.Workers)
	}
	if c.Resync < 0 {
		return fmt.Errorf("pvbinder: resync %v < 0", c.Resync)
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Workers == 0 {
		c.Workers = 8
	}
	if c.Resync == 0 {
		c.Resync = 15 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}
