package plugin

import (
	"context"
	"errors"
	"slices"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kubelab/kubelab/internal/cni/ipam"
)

// GC removes what the plugin holds for attachments the runtime no longer has: GC. The
// runtime lists the live ones in cni.dev/valid-attachments; every address allocated to
// another, its hostPort rules and a veth of the plugin's naming left on the bridge go.
func (p *Plugin) GC(args *skel.CmdArgs) error {
	conf, err := LoadNetConf(args.StdinData)
	if err != nil {
		return err
	}
	ctx, cancel := p.context()
	defer cancel()
	return p.gc(ctx, conf)
}

func (p *Plugin) gc(ctx context.Context, conf *NetConf) error {
	valid := conf.ValidAttachments
	var errs []*types.Error

	if conf.vpc() {
		errs = append(errs, p.gcVPC(ctx, conf)...)
	} else {
		store, err := ipam.New(ipam.Config{Dir: conf.DataDir, Subnet: conf.subnet})
		if err == nil {
			var freed []ipam.Allocation
			freed, err = store.GC(ctx, valid)
			for _, al := range freed {
				p.cfg.Logger.Info("gc: released address", "ip", al.Addr, "container", al.ContainerID, "ifname", al.IfName)
			}
		}
		if err != nil {
			errs = append(errs, ipamError("gc addresses", err))
		}
	}

	markers, err := hostPortMarkers(conf.DataDir)
	if err != nil {
		errs = append(errs, cniErrorf(CodeHostPort, "gc hostPorts: %v", err))
	}
	for chain, a := range markers {
		if slices.Contains(valid, a) {
			continue
		}
		if err := p.teardownHostPorts(ctx, conf.DataDir, chain, false); err != nil {
			errs = append(errs, cniErrorf(CodeHostPort, "gc hostPorts of container %s: %v", a.ContainerID, err))
		}
	}

	if !conf.vpc() {
		if err := p.gcVeths(conf.Bridge, valid); err != nil {
			errs = append(errs, cniErrorf(CodeNodeNetwork, "gc veths: %v", err))
		}
	}
	return firstError(p.cfg.Logger, errs)
}

// gcVeths deletes the ports of bridge named like the plugin's host ends that belong to
// no valid attachment.
func (p *Plugin) gcVeths(bridge string, valid []ipam.Attachment) error {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer h.Close()
	br, err := h.LinkByName(bridge)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, a := range valid {
		keep[HostVethName(a.ContainerID, a.IfName)] = true
	}
	links, err := retryDump(h.LinkList)
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range links {
		name := l.Attrs().Name
		if l.Attrs().MasterIndex != br.Attrs().Index || !isHostVethName(name) || keep[name] {
			continue
		}
		if err := h.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
			errs = append(errs, err)
			continue
		}
		p.cfg.Logger.Info("gc: deleted veth", "veth", name)
	}
	return errors.Join(errs...)
}
