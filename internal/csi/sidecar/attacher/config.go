package attacher

import (
	"time"

	csiclient "github.com/kubelab/kubelab/internal/csi/client"
)

// Config tunes the attacher. Its Tuning defaults to 10 attachments handled at once and
// 60s per CSI call.
type Config struct {
	// DriverName, when set, must be the name the driver reports.
	DriverName string
	csiclient.Tuning
}

func (c *Config) validate() error { return c.Tuning.Validate("attacher") }

func (c *Config) setDefaults() { c.Tuning.SetDefaults(10, 60*time.Second) }
