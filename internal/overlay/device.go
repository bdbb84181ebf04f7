package overlay

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// vtepMAC returns the MAC address of node's VXLAN device: locally administered,
// unicast and derived from the node name, so that a device made again (after a
// restart that found it changed, or deleted by hand) keeps the address the other
// nodes already have in their neighbour and FDB entries.
func vtepMAC(node string) net.HardwareAddr {
	sum := sha256.Sum256([]byte("kubelab-vtep/" + node))
	mac := net.HardwareAddr(sum[:6])
	mac[0] = mac[0]&^0x01 | 0x02
	return mac
}

// vxlanSpec is the VXLAN device the agent wants.
type vxlanSpec struct {
	name     string
	vni      int
	port     int
	mac      net.HardwareAddr
	local    netip.Addr // the underlay's address
	underlay int        // the underlay's ifindex
	mtu      int
}

// link returns the netlink form of s, for LinkAdd.
func (s vxlanSpec) link() *netlink.Vxlan {
	la := netlink.NewLinkAttrs()
	la.Name = s.name
	la.MTU = s.mtu
	la.HardwareAddr = s.mac
	return &netlink.Vxlan{
		LinkAttrs:    la,
		VxlanId:      s.vni,
		VtepDevIndex: s.underlay,
		SrcAddr:      net.IP(s.local.AsSlice()),
		Port:         s.port,
		Learning:     false,
	}
}

// reusable says whether existing link l can serve as the device of s without being
// made again; its MTU may still need setting.
func (s vxlanSpec) reusable(l netlink.Link) error {
	vx, ok := l.(*netlink.Vxlan)
	if !ok {
		return fmt.Errorf("link %s is a %s, not a vxlan", s.name, l.Type())
	}
	var errs []error
	if vx.VxlanId != s.vni {
		errs = append(errs, fmt.Errorf("vni %d, want %d", vx.VxlanId, s.vni))
	}
	if vx.VtepDevIndex != s.underlay {
		errs = append(errs, fmt.Errorf("dev ifindex %d, want %d", vx.VtepDevIndex, s.underlay))
	}
	if local, ok := netip.AddrFromSlice(vx.SrcAddr); !ok || local.Unmap() != s.local {
		errs = append(errs, fmt.Errorf("local %s, want %s", vx.SrcAddr, s.local))
	}
	if vx.Port != s.port {
		errs = append(errs, fmt.Errorf("dstport %d, want %d", vx.Port, s.port))
	}
	if vx.Learning {
		errs = append(errs, errors.New("learning on"))
	}
	if len(vx.Group) > 0 && !vx.Group.IsUnspecified() {
		errs = append(errs, fmt.Errorf("remote/group %s set", vx.Group))
	}
	if vx.FlowBased {
		errs = append(errs, errors.New("external (flow based)"))
	}
	if vx.HardwareAddr.String() != s.mac.String() {
		errs = append(errs, fmt.Errorf("address %s, want %s", vx.HardwareAddr, s.mac))
	}
	return errors.Join(errs...)
}
