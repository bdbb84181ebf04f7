package pluginmanager

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"
)

// Config says which node the manager registers plugins for and where it looks for them.
type Config struct {
	// NodeName is the Node (and CSINode) the registered drivers are recorded in.
	NodeName string
	// RootDir is the kubelet's root dir; the manager watches <RootDir>/plugins_registry,
	// or the directory it links to.
	RootDir string
	// RetryInitial and RetryMax bound the back-off of failed registrations (500ms, 30s).
	RetryInitial, RetryMax time.Duration
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

// RegistryDir is the directory plugins put their registration sockets in.
func (c *Config) RegistryDir() string { return filepath.Join(c.RootDir, "plugins_registry") }

func (c *Config) validate() error {
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("pluginmanager: node name is required"))
	}
	if !filepath.IsAbs(c.RootDir) {
		errs = append(errs, fmt.Errorf("pluginmanager: root dir %q must be an absolute path", c.RootDir))
	}
	if c.RetryInitial < 0 || c.RetryMax < 0 {
		errs = append(errs, errors.New("pluginmanager: retry intervals must not be negative"))
	}
	return errors.Join(errs...)
}

func (c *Config) defaults() {
	if c.RetryInitial == 0 {
		c.RetryInitial = 500 * time.Millisecond
	}
	if c.RetryMax == 0 {
		c.RetryMax = 30 * time.Second
	}
	if c.RetryMax < c.RetryInitial {
		c.RetryMax = c.RetryInitial
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}
