package overlay

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// routeProtocol marks the routes the agent makes (rtnetlink protocol 75, which no
// routing daemon claims), so that it only ever deletes its own.
const routeProtocol = netlink.RouteProtocol(75)

// retryDump calls a netlink dump again when the kernel reports that the table
// changed under it, so that the result is a consistent one.
func retryDump[T any](f func() (T, error)) (T, error) {
	for i := 0; ; i++ {
		v, err := f()
		if errors.Is(err, netlink.ErrDumpInterrupted) && i < 5 {
			continue
		}
		return v, err
	}
}

// isLinkNotFound says whether err means that no link has the name asked for.
func isLinkNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, unix.ENODEV)
}

// isGone says whether a delete failed only because the entry was not there.
func isGone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENODEV)
}

// dataplane reads and writes the agent's kernel state in the node's namespace.
type dataplane struct {
	h        *netlink.Handle
	device   string
	underlay string
	cluster  netip.Prefix
}

// underlayLink is what the agent needs of the underlay.
type underlayLink struct {
	index int
	mtu   int
	ip    netip.Addr
}

// underlayInfo returns the underlay's ifindex, MTU and first global IPv4 address.
func (d *dataplane) underlayInfo() (underlayLink, error) {
	l, err := d.h.LinkByName(d.underlay)
	if err != nil {
		return underlayLink{}, fmt.Errorf("underlay %s: %w", d.underlay, err)
	}
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return d.h.AddrList(l, netlink.FAMILY_V4) })
	if err != nil {
		return underlayLink{}, fmt.Errorf("addresses of underlay %s: %w", d.underlay, err)
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if ok && a.Scope == int(netlink.SCOPE_UNIVERSE) && ip.Unmap().Is4() {
			return underlayLink{index: l.Attrs().Index, mtu: l.Attrs().MTU, ip: ip.Unmap()}, nil
		}
	}
	return underlayLink{}, fmt.Errorf("underlay %s has no global IPv4 address", d.underlay)
}

// ensureVXLAN makes the VXLAN device of spec, up, reusing the existing one when it
// matches. It returns the device's ifindex and whether it was made anew (which
// takes all entries on the old one with it).
func (d *dataplane) ensureVXLAN(spec vxlanSpec) (index int, created bool, reason error, err error) {
	l, err := d.h.LinkByName(spec.name)
	switch {
	case err == nil:
		reason = spec.reusable(l)
		if reason == nil {
			if l.Attrs().MTU != spec.mtu {
				if err := d.h.LinkSetMTU(l, spec.mtu); err != nil {
					return 0, false, nil, fmt.Errorf("set mtu %d on %s: %w", spec.mtu, spec.name, err)
				}
			}
			if l.Attrs().Flags&net.FlagUp == 0 {
				if err := d.h.LinkSetUp(l); err != nil {
					return 0, false, nil, fmt.Errorf("set %s up: %w", spec.name, err)
				}
			}
			return l.Attrs().Index, false, nil, nil
		}
		if err := d.h.LinkDel(l); err != nil && !isGone(err) {
			return 0, false, reason, fmt.Errorf("delete %s (%v): %w", spec.name, reason, err)
		}
	case !isLinkNotFound(err):
		return 0, false, nil, fmt.Errorf("look up %s: %w", spec.name, err)
	}
	if err := d.h.LinkAdd(spec.link()); err != nil {
		return 0, false, reason, fmt.Errorf("add vxlan %s (vni %d, local %s, dstport %d): %w", spec.name, spec.vni, spec.local, spec.port, err)
	}
	l, err = d.h.LinkByName(spec.name)
	if err != nil {
		return 0, false, reason, fmt.Errorf("look up %s: %w", spec.name, err)
	}
	if err := d.h.LinkSetUp(l); err != nil {
		return 0, false, reason, fmt.Errorf("set %s up: %w", spec.name, err)
	}
	return l.Attrs().Index, true, reason, nil
}

// removeDevice deletes the VXLAN device if there is one (direct mode, teardown).
func (d *dataplane) removeDevice() (bool, error) {
	l, err := d.h.LinkByName(d.device)
	if isLinkNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up %s: %w", d.device, err)
	}
	if _, ok := l.(*netlink.Vxlan); !ok {
		return false, fmt.Errorf("link %s is a %s, not the overlay's vxlan device", d.device, l.Type())
	}
	if err := d.h.LinkDel(l); err != nil && !isGone(err) {
		return false, fmt.Errorf("delete %s: %w", d.device, err)
	}
	return true, nil
}

// ensureAddress leaves exactly addr/32 (none when addr is invalid) on the device.
func (d *dataplane) ensureAddress(index int, addr netip.Addr) error {
	l, err := d.h.LinkByIndex(index)
	if err != nil {
		return fmt.Errorf("look up %s: %w", d.device, err)
	}
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return d.h.AddrList(l, netlink.FAMILY_V4) })
	if err != nil {
		return fmt.Errorf("addresses of %s: %w", d.device, err)
	}
	found := false
	for _, a := range addrs {
		ip, _ := netip.AddrFromSlice(a.IP)
		ones, _ := a.Mask.Size()
		if addr.IsValid() && ip.Unmap() == addr && ones == 32 {
			found = true
			continue
		}
		if err := d.h.AddrDel(l, &a); err != nil && !isGone(err) && !errors.Is(err, unix.EADDRNOTAVAIL) {
			return fmt.Errorf("delete address %s from %s: %w", a.IPNet, d.device, err)
		}
	}
	if found || !addr.IsValid() {
		return nil
	}
	a := &netlink.Addr{IPNet: &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(32, 32)}}
	if err := d.h.AddrReplace(l, a); err != nil {
		return fmt.Errorf("add address %s/32 to %s: %w", addr, d.device, err)
	}
	return nil
}

// list returns the entries the agent owns in the kernel: the permanent neighbours
// (inside the cluster CIDR) and FDB entries on the VXLAN device of ifindex vx (none
// when vx is 0), and the routes of its protocol in the main table for subnets inside
// the cluster CIDR.
func (d *dataplane) list(vx int) (entries, error) {
	var e entries
	if vx > 0 {
		neighs, err := retryDump(func() ([]netlink.Neigh, error) { return d.h.NeighList(vx, netlink.FAMILY_V4) })
		if err != nil {
			return entries{}, fmt.Errorf("list neighbours on %s: %w", d.device, err)
		}
		for _, n := range neighs {
			ip, ok := netip.AddrFromSlice(n.IP)
			if !ok || n.State&netlink.NUD_PERMANENT == 0 || !d.cluster.Contains(ip.Unmap()) {
				continue
			}
			e.Neighbours = append(e.Neighbours, neighbour{IP: ip.Unmap(), MAC: n.HardwareAddr.String()})
		}
		fdb, err := retryDump(func() ([]netlink.Neigh, error) { return d.h.NeighList(vx, unix.AF_BRIDGE) })
		if err != nil {
			return entries{}, fmt.Errorf("list fdb of %s: %w", d.device, err)
		}
		for _, f := range fdb {
			dst, ok := netip.AddrFromSlice(f.IP)
			if !ok || f.State&netlink.NUD_PERMANENT == 0 {
				continue
			}
			e.FDB = append(e.FDB, fdbEntry{MAC: f.HardwareAddr.String(), Dst: dst.Unmap()})
		}
	}
	routes, err := retryDump(func() ([]netlink.Route, error) {
		return d.h.RouteListFiltered(netlink.FAMILY_V4,
			&netlink.Route{Table: unix.RT_TABLE_MAIN, Protocol: routeProtocol},
			netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
	})
	if err != nil {
		return entries{}, fmt.Errorf("list routes: %w", err)
	}
	names := map[int]string{}
	for _, r := range routes {
		if r.Dst == nil {
			continue
		}
		dst, ok := netip.AddrFromSlice(r.Dst.IP)
		ones, _ := r.Dst.Mask.Size()
		if !ok {
			continue
		}
		subnet := netip.PrefixFrom(dst.Unmap(), ones)
		if !insideCluster(d.cluster, subnet) {
			continue
		}
		via, _ := netip.AddrFromSlice(r.Gw)
		name, ok := names[r.LinkIndex]
		if !ok {
			if l, err := d.h.LinkByIndex(r.LinkIndex); err == nil {
				name = l.Attrs().Name
			}
			names[r.LinkIndex] = name
		}
		e.Routes = append(e.Routes, route{Dst: subnet, Via: via.Unmap(), Dev: name})
	}
	return e, nil
}

// apply deletes del, then sets set (replacing entries of the same key). Devices are
// ifindexes by name. It goes on past failures and returns them all.
func (d *dataplane) apply(del, set entries, devices map[string]int) error {
	var errs []error
	vx := devices[d.device]
	for _, r := range del.Routes {
		err := d.h.RouteDel(&netlink.Route{Dst: prefixNet(r.Dst), Table: unix.RT_TABLE_MAIN, Protocol: routeProtocol})
		if err != nil && !isGone(err) {
			errs = append(errs, fmt.Errorf("delete route %s: %w", r.Dst, err))
		}
	}
	for _, n := range del.Neighbours {
		err := d.h.NeighDel(&netlink.Neigh{LinkIndex: vx, Family: netlink.FAMILY_V4, IP: n.IP.AsSlice()})
		if err != nil && !isGone(err) {
			errs = append(errs, fmt.Errorf("delete neighbour %s on %s: %w", n.IP, d.device, err))
		}
	}
	for _, f := range del.FDB {
		mac, _ := net.ParseMAC(f.MAC)
		err := d.h.NeighDel(&netlink.Neigh{LinkIndex: vx, Family: unix.AF_BRIDGE, Flags: netlink.NTF_SELF,
			HardwareAddr: mac, IP: f.Dst.AsSlice()})
		if err != nil && !isGone(err) {
			errs = append(errs, fmt.Errorf("delete fdb entry %s on %s: %w", f.MAC, d.device, err))
		}
	}
	for _, f := range set.FDB {
		mac, _ := net.ParseMAC(f.MAC)
		err := d.h.NeighSet(&netlink.Neigh{LinkIndex: vx, Family: unix.AF_BRIDGE, Flags: netlink.NTF_SELF,
			State: netlink.NUD_PERMANENT, HardwareAddr: mac, IP: f.Dst.AsSlice()})
		if err != nil {
			errs = append(errs, fmt.Errorf("set fdb entry %s dst %s on %s: %w", f.MAC, f.Dst, d.device, err))
		}
	}
	for _, n := range set.Neighbours {
		mac, _ := net.ParseMAC(n.MAC)
		err := d.h.NeighSet(&netlink.Neigh{LinkIndex: vx, Family: netlink.FAMILY_V4, Type: unix.RTN_UNICAST,
			State: netlink.NUD_PERMANENT, HardwareAddr: mac, IP: n.IP.AsSlice()})
		if err != nil {
			errs = append(errs, fmt.Errorf("set neighbour %s lladdr %s on %s: %w", n.IP, n.MAC, d.device, err))
		}
	}
	for _, r := range set.Routes {
		idx, ok := devices[r.Dev]
		if !ok || idx == 0 {
			errs = append(errs, fmt.Errorf("set route %s via %s: no device %s", r.Dst, r.Via, r.Dev))
			continue
		}
		nr := &netlink.Route{LinkIndex: idx, Dst: prefixNet(r.Dst), Gw: r.Via.AsSlice(),
			Table: unix.RT_TABLE_MAIN, Protocol: routeProtocol, Scope: netlink.SCOPE_UNIVERSE}
		if r.Dev == d.device {
			nr.Flags = int(netlink.FLAG_ONLINK)
		}
		if err := d.h.RouteReplace(nr); err != nil {
			errs = append(errs, fmt.Errorf("set route %s via %s dev %s: %w", r.Dst, r.Via, r.Dev, err))
		}
	}
	return errors.Join(errs...)
}

// removeRoutes deletes every route of the agent's protocol in the main table.
func (d *dataplane) removeRoutes() error {
	routes, err := retryDump(func() ([]netlink.Route, error) {
		return d.h.RouteListFiltered(netlink.FAMILY_V4,
			&netlink.Route{Table: unix.RT_TABLE_MAIN, Protocol: routeProtocol},
			netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
	})
	if err != nil {
		return fmt.Errorf("list routes: %w", err)
	}
	var errs []error
	for _, r := range routes {
		if err := d.h.RouteDel(&r); err != nil && !isGone(err) {
			errs = append(errs, fmt.Errorf("delete route %s: %w", r.Dst, err))
		}
	}
	return errors.Join(errs...)
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
