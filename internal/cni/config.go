package cni

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubelab/kubelab/internal/util/atomicfile"
)

// ConfFile is the name of the node's CNI configuration in its conf dir.
const ConfFile = "10-kubelab.conflist"

// PluginType is kubelab's CNI plugin (the executable kubelab-cni in the CNI bin dir).
const PluginType = "kubelab-cni"

// PodBridge is the pod bridge of every node, in the node's network namespace.
const PodBridge = "cni0"

// PodMTU leaves room for the VXLAN header (50 bytes) on the VPC's 1500.
const PodMTU = 1450

// Config says where a node's CNI configuration and IPAM store go.
type Config struct {
	// NodeName is the Node whose spec.podCIDR the pods' addresses come from.
	NodeName string
	// NetNS is the node's network namespace (a path), where the plugin makes the pod
	// bridge and the host ends of the pods' veths.
	NetNS string
	// ConfDir is the CNI conf dir the node's containerd reads.
	ConfDir string
	// DataDir holds the plugin's IP allocations (its hostPort state in VPC mode).
	DataDir string
	// IPAMDSocket, when set, puts the node's pods in VPC mode: their addresses come from
	// the node's IP address manager listening there, and the configuration is written at
	// once (the node needs no podCIDR).
	IPAMDSocket string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) validate() error {
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("node name is required"))
	}
	if !filepath.IsAbs(c.NetNS) {
		errs = append(errs, fmt.Errorf("node network namespace %q must be an absolute path", c.NetNS))
	}
	if !filepath.IsAbs(c.ConfDir) || !filepath.IsAbs(c.DataDir) {
		errs = append(errs, fmt.Errorf("conf dir %q and data dir %q must be absolute", c.ConfDir, c.DataDir))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cni config: %w", err)
	}
	return nil
}

// Conflist is the CNI configuration list of a node whose namespace is netns, for podCIDR;
// the plugin keeps its allocations in dataDir. It says CNI 1.0.0, the newest the node's
// containerd reads.
func Conflist(netns, podCIDR, dataDir string) ([]byte, error) {
	prefix, err := netip.ParsePrefix(podCIDR)
	if err != nil {
		return nil, fmt.Errorf("pod CIDR %q: %w", podCIDR, err)
	}
	if !prefix.Addr().Is4() || prefix.Bits() > 30 {
		return nil, fmt.Errorf("pod CIDR %q: want an IPv4 range of at least 4 addresses", podCIDR)
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "kubelab",
		"plugins": []any{
			map[string]any{
				"type":         PluginType,
				"bridge":       PodBridge,
				"mtu":          PodMTU,
				"subnet":       prefix.Masked().String(),
				"dataDir":      dataDir,
				"nodeNetNS":    netns,
				"hairpinMode":  true,
				"capabilities": map[string]bool{"portMappings": true},
			},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// VPCConflist is the CNI configuration list of a node in VPC mode whose namespace is
// netns: kubelab-cni asks the node's IP address manager at ipamdSocket for each pod's
// address (a secondary IP of the node's ENIs) and keeps its hostPort state in dataDir.
func VPCConflist(netns, ipamdSocket, dataDir string) ([]byte, error) {
	if !filepath.IsAbs(ipamdSocket) {
		return nil, fmt.Errorf("ipamd socket %q: want an absolute path", ipamdSocket)
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "kubelab",
		"plugins": []any{
			map[string]any{
				"type":         PluginType,
				"mode":         "vpc",
				"ipamdSocket":  ipamdSocket,
				"mtu":          VPCPodMTU,
				"dataDir":      dataDir,
				"nodeNetNS":    netns,
				"capabilities": map[string]bool{"portMappings": true},
			},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// VPCPodMTU is the pods' MTU in VPC mode: the VPC's own, nothing encapsulated.
const VPCPodMTU = 1500

// InstallPlugins fills binDir, the node's CNI bin dir, with links to the plugins its
// containerd runs: kubelab-cni (the executable at plugin) and the reference loopback
// plugin (from refDir) that containerd uses for the pods' lo.
func InstallPlugins(binDir, plugin, refDir string) error {
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return fmt.Errorf("cni: %w", err)
	}
	for name, target := range map[string]string{PluginType: plugin, "loopback": filepath.Join(refDir, "loopback")} {
		if _, err := os.Stat(target); err != nil {
			return fmt.Errorf("cni: plugin %s: %w", name, err)
		}
		link := filepath.Join(binDir, name)
		if old, err := os.Readlink(link); err == nil && old == target {
			continue
		}
		if err := atomicfile.Symlink(target, link); err != nil {
			return fmt.Errorf("cni: %w", err)
		}
	}
	return nil
}

// Writer writes a node's CNI configuration once its podCIDR is known.
type Writer struct {
	cfg    Config
	client kubernetes.Interface
}

// New builds the writer of one node.
func New(cfg Config, client kubernetes.Interface) (*Writer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Writer{cfg: cfg, client: client}, nil
}

// Run waits for the node's podCIDR (not in VPC mode), writes the configuration and
// returns; it keeps waiting (through API server restarts) until ctx ends.
func (w *Writer) Run(ctx context.Context) error {
	var b []byte
	var cidr string
	var err error
	if w.cfg.IPAMDSocket != "" {
		b, err = VPCConflist(w.cfg.NetNS, w.cfg.IPAMDSocket, w.cfg.DataDir)
	} else {
		if cidr, err = w.waitPodCIDR(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		b, err = Conflist(w.cfg.NetNS, cidr, w.cfg.DataDir)
	}
	if err != nil {
		return err
	}
	path := filepath.Join(w.cfg.ConfDir, ConfFile)
	if old, err := os.ReadFile(path); err == nil && string(old) == string(b) {
		return nil
	}
	if err := os.MkdirAll(w.cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("cni: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("cni: %w", err)
	}
	if err := atomicfile.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("cni: %w", err)
	}
	w.cfg.Logger.Info("pod network configured", "node", w.cfg.NodeName, "podCIDR", cidr, "vpc", w.cfg.IPAMDSocket != "", "netns", w.cfg.NetNS)
	return nil
}

// waitPodCIDR polls the node until it has a podCIDR (the node IPAM controller assigns
// it moments after the node registers).
func (w *Writer) waitPodCIDR(ctx context.Context) (string, error) {
	var cidr string
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		n, err := w.client.CoreV1().Nodes().Get(ctx, w.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			w.cfg.Logger.Debug("wait for pod CIDR", "node", w.cfg.NodeName, "err", err)
			return false, nil
		}
		cidr = n.Spec.PodCIDR
		return cidr != "", nil
	})
	return cidr, err
}
