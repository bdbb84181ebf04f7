package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/kubelab/kubelab/internal/cni/ipam"
)

// Defaults of the network configuration.
const (
	DefaultBridge = "cni0"
	// DefaultMTU leaves room for the 50 bytes of VXLAN encapsulation on a 1500-byte network.
	DefaultMTU = 1450
	// DefaultVPCMTU is the pods' MTU in VPC mode: the VPC's, nothing encapsulated.
	DefaultVPCMTU = 1500
)

// Modes of the plugin.
const (
	// ModeBridge joins pods to the node's bridge with addresses of its podCIDR (the default).
	ModeBridge = "bridge"
	// ModeVPC gives pods secondary IPs of the node's ENIs from the node's IP address
	// manager, routed per pod: no bridge, no overlay.
	ModeVPC = "vpc"
)

// NetConf is the network configuration of type "kubelab-cni" that the runtime passes on
// stdin (one plugin of the node's conflist, with name and cniVersion filled in).
type NetConf struct {
	CNIVersion string `json:"cniVersion,omitempty"`
	Name       string `json:"name,omitempty"`
	Type       string `json:"type,omitempty"`
	// Capabilities declares "portMappings", so that the runtime passes the pod's hostPorts.
	Capabilities map[string]bool `json:"capabilities,omitempty"`

	// Mode is ModeBridge (when empty) or ModeVPC.
	Mode string `json:"mode,omitempty"`
	// IPAMDSocket is the node's IP address manager's API socket (ModeVPC; required there).
	IPAMDSocket string `json:"ipamdSocket,omitempty"`

	// Bridge is the node's pod bridge (default "cni0"); the gateway address goes on it.
	Bridge string `json:"bridge,omitempty"`
	// MTU of the pod's interface and its host end (default 1450, 1500 in ModeVPC).
	MTU int `json:"mtu,omitempty"`
	// Subnet is the node's podCIDR: an IPv4 network of /30 or shorter. Required in
	// ModeBridge, unused in ModeVPC.
	Subnet string `json:"subnet"`
	// DataDir is the absolute path of the IPAM store (and of the plugin's other state).
	// Required.
	DataDir string `json:"dataDir"`
	// NodeNetNS is the node's network namespace (a path). When set, every verb runs inside
	// it, for a runtime that itself runs outside the node's namespace; when empty the
	// plugin's own namespace is the node's.
	NodeNetNS string `json:"nodeNetNS,omitempty"`
	// HairpinMode lets a pod's traffic come back through its own bridge port (default true).
	HairpinMode *bool `json:"hairpinMode,omitempty"`

	// RuntimeConfig carries what the runtime fills in for the declared capabilities.
	RuntimeConfig RuntimeConfig `json:"runtimeConfig,omitzero"`
	// ValidAttachments is the runtime's list of live attachments, sent with GC.
	ValidAttachments []ipam.Attachment `json:"cni.dev/valid-attachments,omitempty"`
	// PrevResult is the result of the ADD, sent with CHECK (and DEL).
	PrevResult json.RawMessage `json:"prevResult,omitempty"`

	subnet netip.Prefix
	rng    ipam.Range
	ports  []PortMapping
}

// RuntimeConfig is the runtimeConfig section of a network configuration.
type RuntimeConfig struct {
	PortMappings []PortMapping `json:"portMappings,omitempty"`
}

// PortMapping is one hostPort of a pod, as containerd fills it from the pod's spec.
type PortMapping struct {
	HostPort      int    `json:"hostPort"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol,omitempty"`
	HostIP        string `json:"hostIP,omitempty"`
}

// LoadNetConf decodes and checks a network configuration, filling in the defaults. A
// configuration that is not JSON is a CNI error of code 6, one with a wrong or missing
// value a CNI error of code 7 naming each.
func LoadNetConf(b []byte) (*NetConf, error) {
	c := &NetConf{}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(c); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, fmt.Sprintf("decode network config: %v", err), "")
	}
	if err := c.validate(); err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	return c, nil
}

// validate fills in the defaults and checks every field.
func (c *NetConf) validate() error {
	var errs []error
	switch c.Mode {
	case "":
		c.Mode = ModeBridge
	case ModeBridge, ModeVPC:
	default:
		errs = append(errs, fmt.Errorf("mode %q: want %q or %q", c.Mode, ModeBridge, ModeVPC))
	}
	if c.Mode == ModeVPC {
		if c.IPAMDSocket == "" {
			errs = append(errs, errors.New("ipamdSocket is required in vpc mode (the node's IP address manager)"))
		} else if !filepath.IsAbs(c.IPAMDSocket) {
			errs = append(errs, fmt.Errorf("ipamdSocket %q must be an absolute path", c.IPAMDSocket))
		}
	}
	if c.Bridge == "" {
		c.Bridge = DefaultBridge
	}
	if err := checkLinkName(c.Bridge); err != nil {
		errs = append(errs, fmt.Errorf("bridge: %w", err))
	}
	if c.MTU == 0 {
		c.MTU = DefaultMTU
		if c.Mode == ModeVPC {
			c.MTU = DefaultVPCMTU
		}
	}
	if c.MTU < 576 || c.MTU > 65535 {
		errs = append(errs, fmt.Errorf("mtu %d: want 576 to 65535", c.MTU))
	}
	if c.HairpinMode == nil {
		c.HairpinMode = ptrTo(true)
	}
	if c.Mode == ModeVPC {
		if c.Subnet != "" {
			errs = append(errs, errors.New("subnet is not used in vpc mode: pod addresses come from the node's ENIs"))
		}
	} else if c.Subnet == "" {
		errs = append(errs, errors.New("subnet is required (the node's podCIDR, e.g. 10.244.1.0/24)"))
	} else if p, err := netip.ParsePrefix(c.Subnet); err != nil {
		errs = append(errs, fmt.Errorf("subnet %q is not a CIDR", c.Subnet))
	} else if r, err := ipam.NewRange(p); err != nil {
		errs = append(errs, err)
	} else {
		c.subnet, c.rng = p, r
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("dataDir is required"))
	} else if !filepath.IsAbs(c.DataDir) {
		errs = append(errs, fmt.Errorf("dataDir %q must be an absolute path", c.DataDir))
	}
	c.ports = nil
	for i, pm := range c.RuntimeConfig.PortMappings {
		pm, skip, err := normalizePortMapping(pm)
		if err != nil {
			errs = append(errs, fmt.Errorf("runtimeConfig.portMappings[%d]: %w", i, err))
			continue
		}
		if !skip {
			c.ports = append(c.ports, pm)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid kubelab-cni network config: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return nil
}

// vpc says whether the configuration is of VPC mode.
func (c *NetConf) vpc() bool { return c.Mode == ModeVPC }

// normalizePortMapping checks pm and lower-cases its protocol; a mapping for an IPv6
// host address is skipped (skip true): the pods' network is IPv4 only.
func normalizePortMapping(pm PortMapping) (_ PortMapping, skip bool, _ error) {
	if pm.HostPort < 1 || pm.HostPort > 65535 {
		return pm, false, fmt.Errorf("hostPort %d: want 1 to 65535", pm.HostPort)
	}
	if pm.ContainerPort < 1 || pm.ContainerPort > 65535 {
		return pm, false, fmt.Errorf("containerPort %d: want 1 to 65535", pm.ContainerPort)
	}
	pm.Protocol = strings.ToLower(pm.Protocol)
	if pm.Protocol == "" {
		pm.Protocol = "tcp"
	}
	if pm.Protocol != "tcp" && pm.Protocol != "udp" && pm.Protocol != "sctp" {
		return pm, false, fmt.Errorf("protocol %q: want tcp, udp or sctp", pm.Protocol)
	}
	if pm.HostIP != "" {
		a, err := netip.ParseAddr(pm.HostIP)
		if err != nil {
			return pm, false, fmt.Errorf("hostIP %q is not an address", pm.HostIP)
		}
		if !a.Unmap().Is4() {
			return pm, true, nil
		}
		if a.IsUnspecified() {
			pm.HostIP = ""
		} else {
			pm.HostIP = a.Unmap().String()
		}
	}
	return pm, false, nil
}

// checkLinkName says whether name can be a Linux interface name.
func checkLinkName(name string) error {
	if len(name) == 0 || len(name) > 15 {
		return fmt.Errorf("%q: want an interface name of 1 to 15 bytes", name)
	}
	if name == "." || name == ".." || strings.ContainsAny(name, "/: \t\n") {
		return fmt.Errorf("%q is not a valid interface name", name)
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }
