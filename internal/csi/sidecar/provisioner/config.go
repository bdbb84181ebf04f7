package provisioner

import (
	"fmt"
	"log/slog"
	"os"
	"time"
)

// Config tunes the provisioner.
type Config struct {
	// DriverName, when set, must be the name the driver reports (GetPluginInfo);
	// empty takes the reported one.
	DriverName string
	// Identity tells this provisioner apart in Events (component
	// "<driver>_<identity>"); default the host name.
	Identity string
	// VolumeNamePrefix and VolumeNameUUIDLength shape PV names: <prefix>-<claim
	// uid>, the UID cut when the length is positive (defaults "pvc", whole UID).
	VolumeNamePrefix     string
	VolumeNameUUIDLength int
	// DefaultFSType is used when the StorageClass names none (default ext4, as the
	// EBS driver's deployment sets --default-fstype).
	DefaultFSType string
	// ExtraCreateMetadata adds csi.storage.k8s.io/pvc/name, pvc/namespace and
	// pv/name to CreateVolume's parameters (the EBS deployment turns it on).
	ExtraCreateMetadata bool
	// StrictTopology restricts the requisite topology to the selected node's.
	StrictTopology bool
	// Workers is the number of claims and volumes handled at once (default 4).
	Workers int
	// Timeout bounds each CSI call (default 60s).
	Timeout time.Duration
	// RetryIntervalStart and RetryIntervalMax bound the backoff of failed claims
	// and volumes (defaults 1s and 5m, as upstream).
	RetryIntervalStart, RetryIntervalMax time.Duration
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) validate() error {
	switch {
	case c.Workers < 0:
		return fmt.Errorf("provisioner: workers %d < 0", c.Workers)
	case c.Timeout < 0 || c.RetryIntervalStart < 0 || c.RetryIntervalMax < 0:
		return fmt.Errorf("provisioner: timeout and retry intervals must not be negative")
	case c.VolumeNameUUIDLength < 0:
		return fmt.Errorf("provisioner: volume name uuid length %d < 0", c.VolumeNameUUIDLength)
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Identity == "" {
		c.Identity, _ = os.Hostname()
	}
	if c.VolumeNamePrefix == "" {
		c.VolumeNamePrefix = "pvc"
	}
	if c.DefaultFSType == "" {
		c.DefaultFSType = "ext4"
	}
	if c.Workers == 0 {
		c.Workers = 4
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
