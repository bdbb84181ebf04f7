package cni

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// ConfFile is the name of the node's CNI configuration in its conf dir.
const ConfFile = "10-kubelab.conflist"

// Config says where a node's CNI configuration and IPAM store go.
type Config struct {
	// NodeName is the Node whose spec.podCIDR the pods' addresses come from.
	NodeName string
	// Bridge is the node's bridge, unique on the machine (see BridgeName).
	Bridge string
	// ConfDir is the CNI conf dir the node's containerd reads.
	ConfDir string
	// DataDir holds host-local's allocations (one file per address).
	DataDir string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) validate() error {
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("node name is required"))
	}
	if c.Bridge == "" || len(c.Bridge) > 15 {
		errs = append(errs, fmt.Errorf("bridge %q: want a link name of 1 to 15 bytes", c.Bridge))
	}
	if !filepath.IsAbs(c.ConfDir) || !filepath.IsAbs(c.DataDir) {
		errs = append(errs, fmt.Errorf("conf dir %q and data dir %q must be absolute", c.ConfDir, c.DataDir))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cni config: %w", err)
	}
	return nil
}

// BridgeName is the bridge of the node that key names (its data dir and name, so that two
// clusters on one machine never share one): "kl" and a hash of key, within the 15 bytes a
// link name may have, the same at every start.
func BridgeName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "kl" + hex.EncodeToString(sum[:])[:10]
}

// Conflist is the CNI configuration list of the node whose bridge is bridge, for podCIDR;
// host-local keeps its allocations in dataDir.
func Conflist(bridge, podCIDR, dataDir string) ([]byte, error) {
	prefix, err := netip.ParsePrefix(podCIDR)
	if err != nil {
		return nil, fmt.Errorf("pod CIDR %q: %w", podCIDR, err)
	}
	if !prefix.Addr().Is4() || prefix.Bits() > 30 {
		return nil, fmt.Errorf("pod CIDR %q: want an IPv4 range of at least 4 addresses", podCIDR)
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "kubelab-" + bridge,
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      bridge,
				"isGateway":   false,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": prefix.Masked().String()}}},
					"dataDir": dataDir,
				},
			},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
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

// Run waits for the node's podCIDR, writes the configuration and returns; it keeps
// waiting (through API server restarts) until ctx ends.
func (w *Writer) Run(ctx context.Context) error {
	cidr, err := w.waitPodCIDR(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	b, err := Conflist(w.cfg.Bridge, cidr, w.cfg.DataDir)
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
	if err := writeFileAtomic(path, b); err != nil {
		return fmt.Errorf("cni: write %s: %w", path, err)
	}
	w.cfg.Logger.Info("pod network configured", "node", w.cfg.NodeName, "podCIDR", cidr, "bridge", w.cfg.Bridge)
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

// RemoveBridge deletes the bridge name (the pods' veths are gone with their sandboxes).
func RemoveBridge(ctx context.Context, name string) error {
	if _, err := os.Stat(filepath.Join("/sys/class/net", name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	out, err := exec.CommandContext(ctx, "ip", "link", "delete", name, "type", "bridge").CombinedOutput()
	if err != nil {
		return fmt.Errorf("delete bridge %s: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func writeFileAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
