package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Config describes a whole cluster on this machine.
type Config struct {
	ControlPlaneConfig
	// Hollow runs the cloud without files or loop devices and the nodes with the hollow
	// kubelet (a fake runtime and mounter): no root needed. Real nodes (containerd, real
	// mounts) are not built yet, so without Hollow the cluster has no nodes.
	Hollow bool
	// Nodes is the number of nodes, spread round-robin over Zones (default one per zone).
	Nodes int
	// Region and Zones of the cloud (us-east-1; us-east-1a, b, c).
	Region string
	Zones  []string
	// CloudProfile is the cloud's latency profile: "fast" (default) or "aws".
	CloudProfile string
	// NodeCapacity is each node's capacity (cpu 2, memory 8Gi, pods 110 when absent).
	NodeCapacity corev1.ResourceList
	// InstanceType of the nodes' instances (m5.large).
	InstanceType string
	// PodStartDelay is how long a hollow pod's containers take to start.
	PodStartDelay time.Duration
	// NodeStatusInterval is how often the kubelets compute their node status (10s).
	NodeStatusInterval time.Duration
	// Logger receives the components' logs (slog.Default()).
	Logger *slog.Logger
}

// DriverName is the CSI driver every node runs.
const DriverName = "ebs.csi.aws.com"

func (c *Config) setDefaults() {
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if len(c.Zones) == 0 {
		c.Zones = []string{c.Region + "a", c.Region + "b", c.Region + "c"}
	}
	if c.Nodes == 0 && c.Hollow {
		c.Nodes = len(c.Zones)
	}
	if c.CloudProfile == "" {
		c.CloudProfile = "fast"
	}
	if c.InstanceType == "" {
		c.InstanceType = "m5.large"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

func (c *Config) validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("data dir is required"))
	} else if !filepath.IsAbs(c.DataDir) {
		errs = append(errs, fmt.Errorf("data dir %q must be absolute", c.DataDir))
	}
	if c.Nodes < 0 {
		errs = append(errs, fmt.Errorf("nodes %d must not be negative", c.Nodes))
	}
	if c.Nodes > 0 && !c.Hollow {
		errs = append(errs, fmt.Errorf("%d real nodes asked for: real nodes (containerd kubelet) are not built yet; use hollow nodes", c.Nodes))
	}
	for _, z := range c.Zones {
		if len(z) <= len(c.Region) || z[:len(c.Region)] != c.Region {
			errs = append(errs, fmt.Errorf("zone %q is not in region %q", z, c.Region))
		}
	}
	if c.PodStartDelay < 0 || c.NodeStatusInterval < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster config: %w", err)
	}
	return nil
}
