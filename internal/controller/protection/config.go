package protection

import (
	"fmt"
	"log/slog"
)

// Config tunes the controllers.
type Config struct {
	// Workers is the number of claims (and, separately, volumes) handled at once
	// (default 2).
	Workers int
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("protection: workers %d < 0", c.Workers)
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Workers == 0 {
		c.Workers = 2
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}
