package snapshotter

import (
	"fmt"
	"log/slog"
	"time"
)

// Config tunes the sidecar.
type Config struct {
	// DriverName, when set, must be the name the driver reports.
	DriverName string
	// SnapshotNamePrefix names CSI snapshots <prefix>-<snapshot uid> (default "snapshot").
	SnapshotNamePrefix string
	// Workers is the number of objects handled at once (default 4).
	Workers int
	// Timeout bounds each CSI call (default 5m).
	Timeout time.Duration
	// ReadyPoll is how often a snapshot that is not ready yet is asked again (1s).
	ReadyPoll time.Duration
	// RetryIntervalStart and RetryIntervalMax bound the backoff (1s and 5m).
	RetryIntervalStart, RetryIntervalMax time.Duration
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("snapshotter: workers %d < 0", c.Workers)
	}
	if c.Timeout < 0 || c.ReadyPoll < 0 || c.RetryIntervalStart < 0 || c.RetryIntervalMax < 0 {
		return fmt.Errorf("snapshotter: durations must not be negative")
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.SnapshotNamePrefix == "" {
		c.SnapshotNamePrefix = "snapshot"
	}
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.Timeout == 0 {
		c.Timeout = 5 * time.Minute
	}
	if c.ReadyPoll == 0 {
		c.ReadyPoll = time.Second
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
