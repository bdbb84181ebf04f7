package plugin

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/containernetworking/cni/pkg/skel"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/vishvananda/netlink"

	"github.com/kubelab/kubelab/internal/cni/ipam"
)

// Check verifies that a pod's attachment is as ADD left it: CHECK. Anything missing is
// a CNI error of code CodeCheckFailed naming it.
func (p *Plugin) Check(args *skel.CmdArgs) error {
	conf, err := LoadNetConf(args.StdinData)
	if err != nil {
		return err
	}
	ctx, cancel := p.context()
	defer cancel()
	if conf.vpc() {
		return p.checkVPC(ctx, conf, args)
	}
	return p.check(ctx, conf, args)
}

func (p *Plugin) check(ctx context.Context, conf *NetConf, args *skel.CmdArgs) error {
	a := ipam.Attachment{ContainerID: args.ContainerID, IfName: args.IfName}
	store, err := ipam.New(ipam.Config{Dir: conf.DataDir, Subnet: conf.subnet})
	if err != nil {
		return ipamError("open ipam store", err)
	}
	addr, ok, err := store.Lookup(ctx, a)
	if err != nil {
		return ipamError("look up the address", err)
	}
	if !ok {
		return cniErrorf(CodeCheckFailed, "no address of %s is allocated to container %s interface %s", conf.subnet, a.ContainerID, a.IfName)
	}
	podAddr := netip.PrefixFrom(addr, conf.subnet.Bits())
	if len(conf.PrevResult) > 0 {
		if err := checkPrevResult(conf, podAddr); err != nil {
			return cniErrorf(CodeCheckFailed, "%v", err)
		}
	}

	n, err := openNamespaces(args.Netns)
	if err != nil {
		return err
	}
	defer n.close()
	hostName := HostVethName(a.ContainerID, a.IfName)
	br, err := n.host.LinkByName(conf.Bridge)
	if err != nil {
		return cniErrorf(CodeCheckFailed, "bridge %s: %v", conf.Bridge, err)
	}
	hl, err := n.host.LinkByName(hostName)
	if err != nil {
		return cniErrorf(CodeCheckFailed, "host end %s of the pod's veth: %v", hostName, err)
	}
	if hl.Attrs().MasterIndex != br.Attrs().Index {
		return cniErrorf(CodeCheckFailed, "host end %s is not a port of bridge %s", hostName, conf.Bridge)
	}
	pl, err := n.pod.LinkByName(a.IfName)
	if err != nil {
		return cniErrorf(CodeCheckFailed, "pod interface %s in %s: %v", a.IfName, args.Netns, err)
	}
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return n.pod.AddrList(pl, netlink.FAMILY_V4) })
	if err != nil {
		return cniErrorf(CodeNodeNetwork, "addresses of %s: %v", a.IfName, err)
	}
	if !hasAddr(addrs, podAddr) {
		return cniErrorf(CodeCheckFailed, "pod interface %s does not have its address %s", a.IfName, podAddr)
	}
	routes, err := retryDump(func() ([]netlink.Route, error) { return n.pod.RouteList(pl, netlink.FAMILY_V4) })
	if err != nil {
		return cniErrorf(CodeNodeNetwork, "routes of %s: %v", a.IfName, err)
	}
	if !hasDefaultRoute(routes, conf.rng.Gateway) {
		return cniErrorf(CodeCheckFailed, "pod interface %s has no default route via %s", a.IfName, conf.rng.Gateway)
	}
	return nil
}

// checkPrevResult says whether the result of the ADD lists the allocated address.
func checkPrevResult(conf *NetConf, addr netip.Prefix) error {
	r, err := version.NewResult(conf.CNIVersion, conf.PrevResult)
	if err != nil {
		return fmt.Errorf("prevResult: %w", err)
	}
	prev, err := types100.GetResult(r)
	if err != nil {
		return fmt.Errorf("prevResult: %w", err)
	}
	for _, ip := range prev.IPs {
		if ip.Address.String() == addr.String() {
			return nil
		}
	}
	return fmt.Errorf("prevResult does not list the allocated address %s", addr)
}

func hasAddr(addrs []netlink.Addr, want netip.Prefix) bool {
	for _, a := range addrs {
		if a.IPNet != nil && a.IPNet.String() == want.String() {
			return true
		}
	}
	return false
}

func hasDefaultRoute(routes []netlink.Route, gw netip.Addr) bool {
	for _, r := range routes {
		isDefault := r.Dst == nil
		if r.Dst != nil {
			ones, _ := r.Dst.Mask.Size()
			isDefault = ones == 0
		}
		if g, ok := netip.AddrFromSlice(r.Gw); isDefault && ok && g.Unmap() == gw {
			return true
		}
	}
	return false
}

// retryDump runs a netlink dump again while the kernel reports it interrupted.
func retryDump[T any](dump func() ([]T, error)) ([]T, error) {
	for range 5 {
		v, err := dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return dump()
}
