package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubelab/kubelab/internal/overlay"
)

// Config describes a whole cluster on this machine.
type Config struct {
	ControlPlaneConfig
	// Hollow runs the cloud without files or loop devices and the nodes with the hollow
	// kubelet (a fake runtime and mounter): no root needed. Without it the nodes are real:
	// containerd and runc, real mounts of loop-device volumes, pods on a CNI bridge (root).
	Hollow bool
	// PauseBinary is the pods' sandbox program built into the pause image (kubelab-pause
	// beside the running executable when empty).
	PauseBinary string
	// OverlayMode is how real nodes reach each other's pod subnets: "vxlan" (default), a
	// VXLAN overlay over the VPC, or "direct", routes via the nodes' VPC addresses (they
	// share one L2).
	OverlayMode string
	// PodNetwork is how real nodes' pods get their addresses: "overlay" (default), an
	// address of the node's podCIDR on its pod bridge, nodes joined by OverlayMode; or
	// "vpc", as the AWS VPC CNI does it: a secondary private IP of one of the node's ENIs,
	// which the node's IP address manager (aws-node's ipamd) keeps in a warm pool, routed
	// per pod, no bridge and no overlay; the nodes' max pods then follows EKS's formula
	// ENIs × (IPv4 addresses per ENI − 1) + 2 of their instance type.
	PodNetwork string
	// CNIBinary is the nodes' CNI plugin, kubelab-cni (beside the running executable when
	// empty).
	CNIBinary string
	// CSIInProcess runs the EBS CSI add-on (the driver's controller and node plugin, the
	// sidecars) inside kubelab, shown as mirror pods, as hollow nodes always do. Without
	// it, real nodes run the add-on as pods of kubelab's own image: the Deployment
	// kube-system/ebs-csi-controller and the DaemonSet kube-system/ebs-csi-node.
	CSIInProcess bool
	// KubelabBinary is the kubelab executable the add-on's image is built from (the
	// running executable when empty).
	KubelabBinary string
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
	// Offline keeps the cluster on the machine (kubelab up --offline). Real nodes' images
	// come only from kubelab's registry (what it builds, imports and cached before): a
	// pod's image it does not hold fails to pull, saying so; without it such an image
	// comes from the registry it names (ImageUpstreams), once, cached in
	// <data-dir>/images/upstream. The VPC has no NAT gateway, and the cluster DNS answers
	// only the cluster's own names.
	Offline bool
	// ImageUpstreams maps registry hosts ("docker.io") to the endpoints kubelab's
	// registry fetches their images from ("http://127.0.0.1:5000"); other hosts are
	// reached at their own address.
	ImageUpstreams map[string]string
	// NodeCIDRMaskSize is the size of each node's podCIDR out of 10.244.0.0/16 (24 when
	// zero): a larger one gives each node fewer pod addresses. Hollow nodes too many for
	// that range take theirs from hollowPodRange.
	NodeCIDRMaskSize int
	// NodeMonitorGracePeriod is how long a node's kubelet may stay silent before the
	// controller-manager marks it NotReady (40 s when zero, as upstream).
	NodeMonitorGracePeriod time.Duration
	// PodGCQuarantine is how long a node must stay missing before the pod garbage
	// collector deletes its pods (40 s when zero, as upstream).
	PodGCQuarantine time.Duration
	// EgressDial is the VPC's way out (real nodes, not Offline): how its NAT gateway
	// connects pods and nodes to addresses outside the cluster's ranges, and how the
	// cluster DNS reaches UpstreamDNS. A net.Dialer in kubelab's own namespace when nil.
	EgressDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// UpstreamDNS are the nameservers the cluster DNS forwards names outside the cluster
	// to, in order (real nodes, not Offline): when nil, the nameservers of
	// /etc/resolv.conf as kubelab reads it when the cluster DNS starts.
	UpstreamDNS []netip.AddrPort
	// HostsFile is the machine's hosts file, where the cloud keeps its load balancers'
	// DNS names so that `curl http://<dns-name>/` works on the machine ("": none).
	// `kubelab up` passes /etc/hosts for a real cluster run as root.
	HostsFile string
	// Logger receives the components' logs (slog.Default()).
	Logger *slog.Logger
	// Progress hears, in a few lines for the user, what the start has got to: the
	// control plane, the images, each node as it becomes Ready, the add-on, cluster DNS.
	// Nil: nothing is told.
	Progress func(step string)
}

// The pod networks of Config.PodNetwork.
const (
	PodNetworkOverlay = "overlay"
	PodNetworkVPC     = "vpc"
)

// vpcPods says whether real nodes' pods are on the VPC (Config.PodNetwork "vpc").
// hollowPodRange is where the podCIDRs of more hollow nodes than 10.244.0.0/16 holds come
// from: 16,384 /24s, clear of the Service range 10.96.0.0/12, of 10.244.0.0/16 and of
// the VPC 172.31.0.0/16. Hollow pods' addresses are records only; no route or rule
// carries them.
const hollowPodRange = "10.0.0.0/10"

// podCIDRRange is the range the controller-manager gives podCIDRs from: its default
// (empty) unless the cluster has more hollow nodes than that range has podCIDRs of mask
// bits (24 when zero).
func podCIDRRange(hollow bool, nodes, mask int) string {
	if mask == 0 {
		mask = 24
	}
	if !hollow || mask < 16 || mask > 30 || nodes <= 1<<(mask-16) {
		return ""
	}
	return hollowPodRange
}

func (c *Config) vpcPods() bool { return !c.Hollow && c.PodNetwork == PodNetworkVPC }

// DriverName is the CSI driver every node runs.
const DriverName = "ebs.csi.aws.com"

// csiInPods says whether the EBS CSI add-on runs as pods (real nodes without
// CSIInProcess).
func (c *Config) csiInPods() bool { return !c.Hollow && !c.CSIInProcess }

func (c *Config) setDefaults() {
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if len(c.Zones) == 0 {
		c.Zones = []string{c.Region + "a", c.Region + "b", c.Region + "c"}
	}
	if c.Nodes == 0 {
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
	if c.Progress == nil {
		c.Progress = func(string) {}
	}
	if c.EgressDial == nil {
		c.EgressDial = (&net.Dialer{}).DialContext
	}
	if c.KubelabBinary == "" {
		if exe, err := os.Executable(); err == nil {
			c.KubelabBinary = exe
		}
	}
	if c.CNIBinary == "" {
		if exe, err := os.Executable(); err == nil {
			c.CNIBinary = filepath.Join(filepath.Dir(exe), "kubelab-cni")
		}
	}
}

func (c *Config) validate() error {
	if c.Nodes > 0 && !c.Hollow && os.Geteuid() != 0 {
		// Alone: nothing else about the config matters until it runs as root.
		return fmt.Errorf("cluster config: %d real nodes need root (loop devices, mounts, containerd, network namespaces): run as root, or use hollow nodes", c.Nodes)
	}
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("data dir is required"))
	} else if !filepath.IsAbs(c.DataDir) {
		errs = append(errs, fmt.Errorf("data dir %q must be absolute", c.DataDir))
	}
	if c.Nodes < 0 {
		errs = append(errs, fmt.Errorf("nodes %d must not be negative", c.Nodes))
	}
	if c.Nodes > 0 && c.csiInPods() {
		if st, err := os.Stat(c.KubelabBinary); err != nil {
			errs = append(errs, fmt.Errorf("kubelab binary, the EBS CSI add-on's image: %w (name it, or run the add-on in process)", err))
		} else if !st.Mode().IsRegular() {
			errs = append(errs, fmt.Errorf("kubelab binary %q, the EBS CSI add-on's image, is not a regular file", c.KubelabBinary))
		}
	}
	for _, z := range c.Zones {
		if len(z) <= len(c.Region) || z[:len(c.Region)] != c.Region {
			errs = append(errs, fmt.Errorf("zone %q is not in region %q", z, c.Region))
		}
	}
	if c.OverlayMode != "" && c.OverlayMode != overlay.ModeVXLAN && c.OverlayMode != overlay.ModeDirect {
		errs = append(errs, fmt.Errorf("overlay mode %q: want %q or %q", c.OverlayMode, overlay.ModeVXLAN, overlay.ModeDirect))
	}
	if c.PodNetwork != "" && c.PodNetwork != PodNetworkOverlay && c.PodNetwork != PodNetworkVPC {
		errs = append(errs, fmt.Errorf("pod network %q: want %q or %q", c.PodNetwork, PodNetworkOverlay, PodNetworkVPC))
	} else if c.PodNetwork == PodNetworkVPC && c.Hollow {
		errs = append(errs, fmt.Errorf("pod network %q needs real nodes: hollow nodes have no network", PodNetworkVPC))
	}
	if c.PodStartDelay < 0 || c.NodeStatusInterval < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster config: %w", err)
	}
	return nil
}
