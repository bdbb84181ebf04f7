package plugin

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ensureBridge makes the node's bridge name if it is missing, sets it up and puts the
// gateway gw on it. Plugin processes racing to make it all succeed: the losers find the
// bridge the winner made. A bridge made here has a MAC address of its own, which it keeps
// (one without would take the lowest of its ports', changing the gateway's MAC under the
// pods as they come and go).
func ensureBridge(h *netlink.Handle, name string, mtu int, gw netip.Prefix) (*netlink.Bridge, error) {
	l, err := h.LinkByName(name)
	if isNotFound(err) {
		l, err = createBridge(h, name, mtu)
	}
	if err != nil {
		return nil, fmt.Errorf("bridge %s: %w", name, err)
	}
	br, ok := l.(*netlink.Bridge)
	if !ok {
		return nil, fmt.Errorf("link %s exists and is a %s, not a bridge", name, l.Type())
	}
	if br.Flags&net.FlagUp == 0 {
		if err := h.LinkSetUp(br); err != nil {
			return nil, fmt.Errorf("set bridge %s up: %w", name, err)
		}
	}
	addr := &netlink.Addr{IPNet: prefixToIPNet(gw)}
	if err := h.AddrAdd(br, addr); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("add gateway %s to bridge %s: %w", gw, name, err)
	}
	return br, nil
}

// createBridge makes the bridge name (or finds the one a racing plugin process made).
func createBridge(h *netlink.Handle, name string, mtu int) (netlink.Link, error) {
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	attrs.MTU = mtu
	attrs.HardwareAddr = randomMAC()
	if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: attrs}); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("create: %w", err)
	}
	return h.LinkByName(name)
}

// randomMAC is a random locally administered unicast MAC address. A MAC given at
// creation stays: a bridge does not take its ports' then, and the plugin knows a veth's
// without asking the kernel.
func randomMAC() net.HardwareAddr {
	mac := make(net.HardwareAddr, 6)
	_, _ = rand.Read(mac)
	mac[0] = mac[0]&^0x01 | 0x02
	return mac
}

func prefixToIPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf)
}
