package plugin

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// errVethExists says that a link with one of the pair's names exists.
var errVethExists = errors.New("veth name taken")

// createVeth makes an attachment's veth pair: hostName in the node's namespace (host),
// up, a port of br with hairpin mode as asked (no bridge port when br is nil); ifName in the pod's namespace (podNS, a
// descriptor of it), still down. Both ends get their MAC address here, which the result
// reports. If a step after the creation fails, the pair is deleted again.
func createVeth(host *netlink.Handle, podNS int, hostName, ifName string, mtu int, br *netlink.Bridge, hairpin bool) (*netlink.Veth, error) {
	attrs := netlink.NewLinkAttrs()
	attrs.Name = hostName
	attrs.MTU = mtu
	attrs.HardwareAddr = randomMAC()
	attrs.Flags = net.FlagUp
	veth := &netlink.Veth{LinkAttrs: attrs, PeerName: ifName, PeerNamespace: netlink.NsFd(podNS), PeerHardwareAddr: randomMAC()}
	if err := host.LinkAdd(veth); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("create veth pair %s/%s: %w", hostName, ifName, errVethExists)
		}
		return nil, fmt.Errorf("create veth pair %s/%s: %w", hostName, ifName, err)
	}
	if br == nil {
		return veth, nil
	}
	err := host.LinkSetMasterByIndex(veth, br.Index)
	if err != nil {
		err = fmt.Errorf("attach %s to bridge %s: %w", hostName, br.Name, err)
	} else if hairpin {
		if err = host.LinkSetHairpin(veth, true); err != nil {
			err = fmt.Errorf("set hairpin mode on %s: %w", hostName, err)
		}
	}
	if err != nil {
		_ = host.LinkDel(veth)
		return nil, err
	}
	return veth, nil
}

// configurePod gives the pod's interface ifName its address, sets it up and routes the
// pod's traffic through the gateway gw.
func configurePod(pod *netlink.Handle, ifName string, addr netip.Prefix, gw netip.Addr) error {
	l, err := pod.LinkByName(ifName)
	if err != nil {
		return fmt.Errorf("pod interface %s: %w", ifName, err)
	}
	if err := pod.AddrAdd(l, &netlink.Addr{IPNet: prefixToIPNet(addr)}); err != nil {
		return fmt.Errorf("add %s to pod interface %s: %w", addr, ifName, err)
	}
	if err := pod.LinkSetUp(l); err != nil {
		return fmt.Errorf("set pod interface %s up: %w", ifName, err)
	}
	route := &netlink.Route{
		LinkIndex: l.Attrs().Index,
		Dst:       &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)},
		Gw:        gw.AsSlice(),
	}
	if err := pod.RouteAdd(route); err != nil {
		return fmt.Errorf("add default route via %s to pod interface %s: %w", gw, ifName, err)
	}
	return nil
}

// deleteLink deletes the link name if it exists; found says whether it did.
func deleteLink(h *netlink.Handle, name string) (found bool, err error) {
	l, err := h.LinkByName(name)
	if isNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up %s: %w", name, err)
	}
	if err := h.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
		return true, fmt.Errorf("delete %s: %w", name, err)
	}
	return true, nil
}
