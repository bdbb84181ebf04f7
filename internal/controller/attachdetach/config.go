package attachdetach

import (
	"fmt"
	"log/slog"
	"time"
)

// Component is the name the controller records Events under, as upstream.
const Component = "attachdetach-controller"

// Config tunes the controller.
type Config struct {
	// Workers is the number of nodes synced at once (default 4).
	Workers int
	// MaxWaitForUnmount is how long a volume in use on an unhealthy node may keep
	// its attachment after no pod needs it (default 6m, as upstream).
	MaxWaitForUnmount time.Duration
	// Resync is how often every node is looked at again (default 30s).
	Resync time.Duration
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("attachdetach: workers %d < 0", c.Workers)
	}
	if c.MaxWaitForUnmount < 0 || c.Resync < 0 {
		return fmt.Errorf("attachdetach: durations must not be negative")
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.MaxWaitForUnmount == 0 {
		c.MaxWaitForUnmount = 6 * time.Minute
	}
	if c.Resync == 0 {
		c.Resync = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}
