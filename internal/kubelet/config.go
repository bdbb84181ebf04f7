package kubelet

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Config describes one node and how its kubelet behaves.
type Config struct {
	// NodeName is the Node object's name (and kubernetes.io/hostname).
	NodeName string
	// Zone is the node's availability zone (e.g. us-east-1a); Region defaults to the zone
	// without its last letter.
	Zone, Region string
	// InstanceID is the node's EC2 instance id: the CSI node id and the providerID.
	InstanceID string
	// InstanceType becomes node.kubernetes.io/instance-type (m5.large when empty).
	InstanceType string
	// Capacity of the node: cpu, memory, pods (2, 8Gi, 110 when absent); allocatable equals it.
	Capacity corev1.ResourceList
	// Hollow runs the node without a container runtime or mounts (fakes for both); it is the
	// only mode this package has so far.
	Hollow bool
	// RootDir is the kubelet's root dir; volume paths are computed under it (in hollow mode
	// nothing is written there).
	RootDir string
	// NodeIP is the node's InternalIP (optional).
	NodeIP string
	// Addresses are more addresses the node reports (a real node on this machine names
	// localhost as its InternalDNS, where its kubelet server listens).
	Addresses []corev1.NodeAddress
	// ServerPort is the kubelet server's port the node reports in
	// status.daemonEndpoints (10250 when 0).
	ServerPort int32
	// Labels are added to the node's labels.
	Labels map[string]string
	// CSIDriverName is the CSI driver registered in the CSINode (ebs.csi.aws.com).
	CSIDriverName string
	// MaxVolumes is the driver's allocatable volume count in the CSINode (25).
	MaxVolumes int32
	// LeaseDuration and LeaseRenewInterval of the node's Lease (40 s, 10 s).
	LeaseDuration, LeaseRenewInterval time.Duration
	// StatusUpdateInterval is how often the node status is computed and written when it
	// changed (10 s); StatusReportInterval is how often it is written anyway (5 min).
	StatusUpdateInterval, StatusReportInterval time.Duration
	// PodStartDelay is how long a hollow pod's containers take to start.
	PodStartDelay time.Duration
	// Workers sync pods concurrently (4; hollow nodes 2).
	Workers int
	// PodEvents enables the kubelet's Pulled/Created/Started/Killing events.
	PodEvents bool
	// ExternalCloudProvider is upstream's --cloud-provider=external: the cloud's facts
	// (providerID, instance type, zone and region labels, addresses) come from the
	// cloud-controller-manager, so the kubelet registers its Node with the taint
	// node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule and without them,
	// names NodeIP in the annotation alpha.kubernetes.io/provided-node-ip, and reports
	// addresses only while the node has none.
	ExternalCloudProvider bool
}

// DefaultCSIDriver is the driver hollow nodes register.
const DefaultCSIDriver = "ebs.csi.aws.com"

func (c *Config) validate() error {
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("node name is required"))
	} else if msgs := validation.IsDNS1123Subdomain(c.NodeName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("node name %q: %v", c.NodeName, msgs))
	}
	if c.Zone == "" {
		errs = append(errs, errors.New("zone is required"))
	}
	if c.InstanceID == "" {
		errs = append(errs, errors.New("instance id is required"))
	}
	for name, q := range c.Capacity {
		if q.Sign() <= 0 {
			errs = append(errs, fmt.Errorf("capacity %s=%s must be positive", name, q.String()))
		}
	}
	if c.MaxVolumes < 0 || c.Workers < 0 || c.LeaseDuration < 0 || c.LeaseRenewInterval < 0 ||
		c.StatusUpdateInterval < 0 || c.StatusReportInterval < 0 || c.PodStartDelay < 0 {
		errs = append(errs, errors.New("counts and durations must not be negative"))
	}
	if c.LeaseDuration > 0 && c.LeaseRenewInterval > 0 && c.LeaseRenewInterval >= c.LeaseDuration {
		errs = append(errs, fmt.Errorf("lease renew interval %v must be shorter than the lease duration %v", c.LeaseRenewInterval, c.LeaseDuration))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kubelet config: %w", err)
	}
	return nil
}

func (c *Config) defaults() {
	if c.Region == "" {
		c.Region = c.Zone
		if n := len(c.Zone); n > 1 && c.Zone[n-1] >= 'a' && c.Zone[n-1] <= 'z' {
			c.Region = c.Zone[:n-1]
		}
	}
	if c.InstanceType == "" {
		c.InstanceType = "m5.large"
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("2"),
		corev1.ResourceMemory:           resource.MustParse("8Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	for k, v := range c.Capacity {
		capacity[k] = v
	}
	c.Capacity = capacity
	if c.RootDir == "" {
		c.RootDir = filepath.Join("/var/lib/kubelab/nodes", c.NodeName, "kubelet")
	}
	if c.CSIDriverName == "" {
		c.CSIDriverName = DefaultCSIDriver
	}
	if c.MaxVolumes == 0 {
		c.MaxVolumes = 25
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = 40 * time.Second
	}
	if c.LeaseRenewInterval == 0 {
		c.LeaseRenewInterval = 10 * time.Second
	}
	if c.StatusUpdateInterval == 0 {
		c.StatusUpdateInterval = 10 * time.Second
	}
	if c.StatusReportInterval == 0 {
		c.StatusReportInterval = 5 * time.Minute
	}
	if c.Workers == 0 && c.Hollow {
		// A hollow sync waits for its API calls only (and PodStartDelay): two workers
		// keep a node's pods moving, and thousands of nodes hold fewer idle goroutines.
		c.Workers = 2
	}
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.ServerPort == 0 {
		c.ServerPort = kubeletPort
	}
}
