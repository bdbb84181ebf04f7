package vpc

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/kubelab/kubelab/internal/util/netns"
)

// The VPC's plan.
const (
	// CIDR is the VPC's range; the cloud gives instances addresses in it.
	CIDR = "172.31.0.0/16"
	// ControlPlaneIP is the control plane's address on the VPC (one the cloud never gives an
	// instance: the first four of a subnet are reserved).
	ControlPlaneIP = "172.31.0.2"
	// EC2EndpointIP is the EC2 API's interface endpoint on the VPC (reserved like
	// ControlPlaneIP), where ec2.<region>.amazonaws.com resolves on the nodes.
	EC2EndpointIP = "172.31.0.3"
	// RouterIP is the VPC router's address, the nodes' default gateway. The router has no
	// uplink: what is sent to it for another network is dropped there, unless the NAT
	// gateway, which listens on this address, carries it.
	RouterIP = "172.31.0.1"
	// MetadataIP is the instance metadata service's address inside each node.
	MetadataIP = "169.254.169.254"
	// Bridge is the VPC's bridge, in the VPC's namespace.
	Bridge = "vpc0"
	// NodeInterface is a node's interface on the VPC, in the node's namespace.
	NodeInterface = "eth0"
)

// NetNSDir is where named network namespaces live (where `ip netns` looks).
const NetNSDir = "/run/netns"

// Config names one cluster's VPC.
type Config struct {
	// DataDir is the cluster's data dir; the namespaces' names carry a hash of it.
	DataDir string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if !filepath.IsAbs(c.DataDir) {
		return fmt.Errorf("vpc config: data dir %q must be absolute", c.DataDir)
	}
	return nil
}

// VPC is one cluster's VPC and its nodes' namespaces.
type VPC struct {
	cfg    Config
	prefix string
	fabric *Fabric
}

// New names the VPC of the cluster at cfg.DataDir; it makes nothing yet.
func New(cfg Config) (*VPC, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	v := &VPC{cfg: cfg, prefix: Prefix(cfg.DataDir)}
	v.fabric = &Fabric{v: v, desired: map[string][]Interface{}, nodes: map[string]string{}}
	return v, nil
}

// Prefix starts the name of every namespace of the cluster at dataDir.
func Prefix(dataDir string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(dataDir)))
	return "kubelab-" + hex.EncodeToString(sum[:])[:8] + "-"
}

// Name is the VPC namespace's name.
func (v *VPC) Name() string { return v.prefix + "vpc" }

// Path is the VPC namespace's file.
func (v *VPC) Path() string { return filepath.Join(NetNSDir, v.Name()) }

// NodeName is node's namespace name.
func (v *VPC) NodeName(node string) string { return v.prefix + node }

// NodePath is node's namespace file.
func (v *VPC) NodePath(node string) string { return filepath.Join(NetNSDir, v.NodeName(node)) }

// Ensure makes the VPC's namespace with its bridge and the control plane's address, or
// finds them as a previous start left them.
func (v *VPC) Ensure() error {
	if err := ensureNetNS(v.Path()); err != nil {
		return fmt.Errorf("vpc: %w", err)
	}
	err := withHandle(v.Path(), func(h *netlink.Handle) error {
		if err := setUp(h, "lo"); err != nil {
			return err
		}
		br, err := h.LinkByName(Bridge)
		if err != nil {
			attrs := netlink.NewLinkAttrs()
			attrs.Name = Bridge
			if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: attrs}); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("add bridge %s: %w", Bridge, err)
			}
			if br, err = h.LinkByName(Bridge); err != nil {
				return fmt.Errorf("bridge %s: %w", Bridge, err)
			}
		}
		// A bridge whose MAC was never set takes its ports' lowest one, and a change of
		// its MAC flushes its neighbour entries, the fabric's permanent ones too: a
		// port added with a lower MAC would make every secondary address of the VPC
		// unreachable from it. A MAC set once stays.
		if mac := v.bridgeMAC(); br.Attrs().HardwareAddr.String() != mac.String() {
			if err := h.LinkSetHardwareAddr(br, mac); err != nil {
				return fmt.Errorf("set the MAC of bridge %s: %w", Bridge, err)
			}
		}
		for _, a := range []string{RouterIP, ControlPlaneIP, EC2EndpointIP} {
			if err := ensureAddr(h, br, a+"/16"); err != nil {
				return err
			}
		}
		return h.LinkSetUp(br)
	})
	if err != nil {
		return fmt.Errorf("vpc %s: %w", v.Name(), err)
	}
	return nil
}

// bridgeMAC is vpc0's MAC: locally administered, unicast, from the namespaces' prefix so
// that two clusters' bridges differ.
func (v *VPC) bridgeMAC() net.HardwareAddr {
	sum := sha256.Sum256([]byte(v.prefix + Bridge))
	return net.HardwareAddr{0x0a, sum[0], sum[1], sum[2], sum[3], sum[4]}
}

// Node is one node's place on the VPC.
type Node struct {
	// Name of the node.
	Name string
	// IP and MAC are its instance's private address and interface MAC.
	IP, MAC string
	// InstanceID is its instance's id: the fabric gives the node its instance's other
	// interfaces and delivers their addresses to it ("": none).
	InstanceID string
}

// EnsureNode makes node's namespace with eth0 on the VPC bridge, or finds it as a
// previous start left it, and returns the namespace's path.
func (v *VPC) EnsureNode(n Node) (string, error) {
	ip := net.ParseIP(n.IP).To4()
	if ip == nil || !inVPC(ip) {
		return "", fmt.Errorf("vpc: node %s: address %q is not an IPv4 address in %s", n.Name, n.IP, CIDR)
	}
	mac, err := net.ParseMAC(n.MAC)
	if n.MAC == "" {
		mac, err = nil, nil
	}
	if err != nil {
		return "", fmt.Errorf("vpc: node %s: mac %q: %w", n.Name, n.MAC, err)
	}
	path := v.NodePath(n.Name)
	if err := ensureNetNS(path); err != nil {
		return "", fmt.Errorf("vpc: node %s: %w", n.Name, err)
	}
	if err := v.attach(n.Name, path, ip, mac); err != nil {
		return "", fmt.Errorf("vpc: node %s: %w", n.Name, err)
	}
	if err := configureNode(path); err != nil {
		return "", fmt.Errorf("vpc: node %s: %w", n.Name, err)
	}
	if n.InstanceID != "" {
		if err := v.fabric.bind(n.InstanceID, n.Name); err != nil {
			return "", err
		}
	}
	return path, nil
}

// attach puts eth0 of the node's namespace at path on the VPC bridge: a veth pair whose VPC
// end is a port of vpc0.
func (v *VPC) attach(node, path string, ip net.IP, mac net.HardwareAddr) error {
	return withHandle(path, func(nh *netlink.Handle) error {
		if err := setUp(nh, "lo"); err != nil {
			return err
		}
		eth, err := nh.LinkByName(NodeInterface)
		if err != nil {
			if eth, err = v.newPort(node, path, mac); err != nil {
				return err
			}
		}
		if err := ensureAddr(nh, eth, ip.String()+"/16"); err != nil {
			return err
		}
		if err := nh.LinkSetUp(eth); err != nil {
			return fmt.Errorf("set %s up: %w", NodeInterface, err)
		}
		// A default route, as a node in a VPC has: traffic to Service addresses leaves
		// through it and the proxy's rules rewrite it on the way.
		if err := nh.RouteReplace(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: net.ParseIP(RouterIP)}); err != nil {
			return fmt.Errorf("default route via %s: %w", RouterIP, err)
		}
		lo, err := nh.LinkByName("lo")
		if err != nil {
			return err
		}
		return ensureAddr(nh, lo, MetadataIP+"/32")
	})
}

// newPort makes the veth pair of node: its VPC end on vpc0, its other end eth0 in the node's
// namespace at path.
func (v *VPC) newPort(node, path string, mac net.HardwareAddr) (netlink.Link, error) {
	port := portName(node)
	var eth netlink.Link
	err := withHandle(v.Path(), func(vh *netlink.Handle) error {
		br, err := vh.LinkByName(Bridge)
		if err != nil {
			return fmt.Errorf("bridge %s: %w", Bridge, err)
		}
		if old, err := vh.LinkByName(port); err == nil { // a port whose node end is gone
			_ = vh.LinkDel(old)
		}
		nsFile, err := os.Open(path)
		if err != nil {
			return err
		}
		defer nsFile.Close()
		attrs := netlink.NewLinkAttrs()
		attrs.Name = port
		attrs.MasterIndex = br.Attrs().Index
		veth := &netlink.Veth{LinkAttrs: attrs, PeerName: NodeInterface, PeerHardwareAddr: mac,
			PeerNamespace: netlink.NsFd(int(nsFile.Fd()))}
		if err := vh.LinkAdd(veth); err != nil {
			return fmt.Errorf("add veth %s/%s: %w", port, NodeInterface, err)
		}
		l, err := vh.LinkByName(port)
		if err != nil {
			return err
		}
		return vh.LinkSetUp(l)
	})
	if err != nil {
		return nil, err
	}
	err = withHandle(path, func(nh *netlink.Handle) error {
		eth, err = nh.LinkByName(NodeInterface)
		return err
	})
	return eth, err
}

// Port is node's port on the VPC bridge (in the VPC's namespace), where the node's
// traffic to the VPC passes.
func (v *VPC) Port(node string) string { return portName(node) }

// portName is node's port on the VPC bridge: a link name of at most 15 bytes.
func portName(node string) string {
	sum := sha256.Sum256([]byte(node))
	return "vn" + hex.EncodeToString(sum[:])[:10]
}

// configureNode sets the node's sysctls: IPv4 forwarding, and bridged IPv4 traffic through
// netfilter.
func configureNode(path string) error {
	return netns.Do(path, func() error {
		for key, value := range map[string]string{
			"net/ipv4/ip_forward":                 "1",
			"net/bridge/bridge-nf-call-iptables":  "1",
			"net/bridge/bridge-nf-call-ip6tables": "1",
		} {
			if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644); err != nil {
				return fmt.Errorf("sysctl %s: %w", strings.ReplaceAll(key, "/", "."), err)
			}
		}
		return nil
	})
}

// RemoveNode deletes node's namespace and with it everything in it; its port on the VPC
// bridge goes with its veth peer.
func (v *VPC) RemoveNode(node string) error {
	v.fabric.unbind(node)
	return removeNetNS(v.NodePath(node))
}

// Remove deletes every namespace of the cluster: its nodes' and the VPC's.
func (v *VPC) Remove() error {
	return RemoveAll(v.cfg.DataDir)
}

// RemoveAll deletes every namespace of the cluster at dataDir.
func RemoveAll(dataDir string) error {
	paths, err := filepath.Glob(filepath.Join(NetNSDir, Prefix(dataDir)+"*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range paths {
		errs = append(errs, removeNetNS(p))
	}
	return errors.Join(errs...)
}

// Namespaces lists the namespaces of the cluster at dataDir that exist.
func Namespaces(dataDir string) []string {
	paths, _ := filepath.Glob(filepath.Join(NetNSDir, Prefix(dataDir)+"*"))
	return paths
}

func inVPC(ip net.IP) bool {
	_, vpc, _ := net.ParseCIDR(CIDR)
	return vpc.Contains(ip)
}
