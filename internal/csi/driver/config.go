package driver

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Mode says which CSI services a driver process serves.
type Mode string

// The modes of `kubelab csi-driver --mode`.
const (
	ModeController Mode = "controller"
	ModeNode       Mode = "node"
	ModeAll        Mode = "all"
)

func (m Mode) controller() bool { return m == ModeController || m == ModeAll }
func (m Mode) node() bool       { return m == ModeNode || m == ModeAll }

// DriverName is the CSI driver name, the upstream one, so EKS manifests apply.
const DriverName = "ebs.csi.aws.com"

// Config is the driver's configuration.
type Config struct {
	// Mode is controller, node or all.
	Mode Mode
	// Endpoint is the unix socket to serve on: unix:///path/csi.sock or a path.
	Endpoint string
	// DriverName defaults to ebs.csi.aws.com; Version is reported by GetPluginInfo.
	DriverName string
	Version    string
	// MetricsAddress, when set, serves Prometheus metrics on http://ADDR/metrics
	// (a 127.0.0.1 address).
	MetricsAddress string

	// Controller settings.
	// DefaultZone is the zone of a volume whose request names none; when empty, the
	// first available zone of the region.
	DefaultZone string
	// DefaultVolumeSizeGiB is the size of a volume whose request names none (100).
	DefaultVolumeSizeGiB int32
	// ExtraTags are put on every volume and snapshot the driver creates.
	ExtraTags map[string]string
	// OperationTimeout bounds the wait for a volume to become available, attached,
	// detached or resized (default 2m); PollInterval is the first wait between polls
	// (default 10ms, doubling up to 1s).
	OperationTimeout time.Duration
	PollInterval     time.Duration

	// Node settings.
	// DeviceDir is where the node finds the devices of attached volumes (default /dev).
	DeviceDir string
	// VolumeAttachLimit overrides the per-node volume limit; ReservedAttachments is
	// subtracted from the computed one.
	VolumeAttachLimit   int64
	ReservedAttachments int64
	// Hollow means the node side uses a fake mounter and fake devices (no root).
	Hollow bool
}

func (c *Config) setDefaults() {
	if c.DriverName == "" {
		c.DriverName = DriverName
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.DefaultVolumeSizeGiB == 0 {
		c.DefaultVolumeSizeGiB = 100
	}
	if c.OperationTimeout == 0 {
		c.OperationTimeout = 2 * time.Minute
	}
	if c.PollInterval == 0 {
		c.PollInterval = 10 * time.Millisecond
	}
	if c.DeviceDir == "" {
		c.DeviceDir = "/dev"
	}
}

func (c *Config) validate() error {
	var errs []error
	switch c.Mode {
	case ModeController, ModeNode, ModeAll:
	default:
		errs = append(errs, fmt.Errorf("mode %q: want controller, node or all", c.Mode))
	}
	if _, err := socketPath(c.Endpoint); err != nil {
		errs = append(errs, err)
	}
	if c.MetricsAddress != "" {
		host, _, err := net.SplitHostPort(c.MetricsAddress)
		if err != nil {
			errs = append(errs, fmt.Errorf("metrics address %q: %w", c.MetricsAddress, err))
		} else if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			errs = append(errs, fmt.Errorf("metrics address %q: must be a loopback address", c.MetricsAddress))
		}
	}
	if c.DefaultVolumeSizeGiB < 0 {
		errs = append(errs, fmt.Errorf("default volume size %d GiB: must be positive", c.DefaultVolumeSizeGiB))
	}
	if c.VolumeAttachLimit < 0 || c.ReservedAttachments < 0 {
		errs = append(errs, errors.New("volume attach limit and reserved attachments must not be negative"))
	}
	if c.OperationTimeout < 0 || c.PollInterval < 0 {
		errs = append(errs, errors.New("operation timeout and poll interval must not be negative"))
	}
	return errors.Join(errs...)
}

// socketPath turns an endpoint (unix:///path or /path) into a socket path.
func socketPath(endpoint string) (string, error) {
	if endpoint == "" {
		return "", errors.New("endpoint is empty: want unix:///path/csi.sock")
	}
	p := endpoint
	if strings.Contains(endpoint, "://") {
		scheme, rest, _ := strings.Cut(endpoint, "://")
		if scheme != "unix" {
			return "", fmt.Errorf("endpoint %q: only unix sockets are served", endpoint)
		}
		p = rest
	}
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("endpoint %q: socket path must be absolute", endpoint)
	}
	return p, nil
}
