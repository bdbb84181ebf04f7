package podautoscaler

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/utils/clock"
)

// ComponentName is the source of the controller's Events, as upstream.
const ComponentName = "horizontal-pod-autoscaler"

// Config tunes the controller; zero values take kube-controller-manager's defaults.
type Config struct {
	// Workers is the number of autoscalers synced at once (5).
	Workers int
	// SyncPeriod is how often each autoscaler is reconciled (15s,
	// --horizontal-pod-autoscaler-sync-period).
	SyncPeriod time.Duration
	// DownscaleStabilizationWindow is how far back recommendations are looked at before
	// scaling down, for autoscalers that set no scale-down stabilization window (5m).
	DownscaleStabilizationWindow time.Duration
	// Tolerance is the usage ratio distance from 1.0 under which nothing is scaled (0.1),
	// for autoscalers that set no tolerance of their own.
	Tolerance float64
	// CPUInitializationPeriod is how long after a pod starts its CPU samples are taken
	// only once it is ready and a metrics window has passed since (5m).
	CPUInitializationPeriod time.Duration
	// InitialReadinessDelay is how long after a pod starts an unready pod counts as
	// never having been ready (30s).
	InitialReadinessDelay time.Duration
	// Clock is the time the controller goes by (the real clock).
	Clock clock.Clock
	// Logger receives structured logs (slog.Default()).
	Logger *slog.Logger
}

func (c *Config) validate() error {
	var errs []error
	if c.Workers < 0 {
		errs = append(errs, fmt.Errorf("workers %d < 0", c.Workers))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"sync period", c.SyncPeriod}, {"downscale stabilization window", c.DownscaleStabilizationWindow},
		{"CPU initialization period", c.CPUInitializationPeriod}, {"initial readiness delay", c.InitialReadinessDelay}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s %s < 0", d.name, d.v))
		}
	}
	if c.Tolerance < 0 {
		errs = append(errs, fmt.Errorf("tolerance %g < 0", c.Tolerance))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("horizontal pod autoscaler: %w", err)
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Workers == 0 {
		c.Workers = 5
	}
	if c.SyncPeriod == 0 {
		c.SyncPeriod = 15 * time.Second
	}
	if c.DownscaleStabilizationWindow == 0 {
		c.DownscaleStabilizationWindow = 5 * time.Minute
	}
	if c.Tolerance == 0 {
		c.Tolerance = 0.1
	}
	if c.CPUInitializationPeriod == 0 {
		c.CPUInitializationPeriod = 5 * time.Minute
	}
	if c.InitialReadinessDelay == 0 {
		c.InitialReadinessDelay = 30 * time.Second
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}
