package resizer

import (
	"time"

	csiclient "github.com/kubelab/kubelab/internal/csi/client"
)

// Config tunes the resizer. Its Tuning defaults to 4 claims handled at once and 5m per CSI
// call (a cloud resize takes a while).
type Config struct {
	// DriverName, when set, must be the name the driver reports.
	DriverName string
	csiclient.Tuning
}

func (c *Config) validate() error { return c.Tuning.Validate("resizer") }

func (c *Config) setDefaults() { c.Tuning.SetDefaults(4, 5*time.Minute) }
