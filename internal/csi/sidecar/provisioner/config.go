package provisioner

import (
	"fmt"
	"os"
	"time"

	csiclient "github.com/kubelab/kubelab/internal/csi/client"
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
	// Tuning defaults to 100 claims and volumes handled at once (upstream's
	// --worker-threads) and 60s per CSI call.
	csiclient.Tuning
}

func (c *Config) validate() error {
	if err := c.Tuning.Validate("provisioner"); err != nil {
		return err
	}
	if c.VolumeNameUUIDLength < 0 {
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
	c.Tuning.SetDefaults(100, 60*time.Second)
}
