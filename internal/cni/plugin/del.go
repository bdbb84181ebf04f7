package plugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/kubelab/kubelab/internal/cni/ipam"
)

// Del disconnects a pod: DEL. It is idempotent and does every step it can: a missing
// netns, interface, address or rule is not an error.
func (p *Plugin) Del(args *skel.CmdArgs) error {
	conf, err := LoadNetConf(args.StdinData)
	if err != nil {
		return err
	}
	ctx, cancel := p.context()
	defer cancel()
	del := p.del
	if conf.vpc() {
		del = p.delVPC
	}
	if err := del(ctx, conf, args); err != nil {
		p.cfg.Logger.Warn("del failed", "container", args.ContainerID, "ifname", args.IfName, "err", err)
		return err
	}
	return nil
}

func (p *Plugin) del(ctx context.Context, conf *NetConf, args *skel.CmdArgs) error {
	a := ipam.Attachment{ContainerID: args.ContainerID, IfName: args.IfName}
	var errs []*types.Error

	// The rules first, so that nothing is DNATed to an address about to be free.
	if err := p.teardownHostPorts(ctx, conf.DataDir, hostPortChain(a.ContainerID, a.IfName), len(conf.ports) > 0); err != nil {
		errs = append(errs, cniErrorf(CodeHostPort, "remove hostPorts of container %s: %v", a.ContainerID, err))
	}

	if err := deleteVeth(args.Netns, HostVethName(a.ContainerID, a.IfName), a.IfName); err != nil {
		errs = append(errs, cniErrorf(CodeNodeNetwork, "%v", err))
	}

	store, err := ipam.New(ipam.Config{Dir: conf.DataDir, Subnet: conf.subnet})
	if err == nil {
		addrs, rerr := store.Release(ctx, a)
		err = rerr
		if len(addrs) > 0 {
			p.cfg.Logger.Debug("released", "container", a.ContainerID, "ifname", a.IfName, "ips", addrs)
		}
	}
	if err != nil {
		errs = append(errs, ipamError("release the address", err))
	}
	return firstError(p.cfg.Logger, errs)
}

// firstError returns the first of errs and logs the others, which the runtime would not
// see.
func firstError(l *slog.Logger, errs []*types.Error) error {
	if len(errs) == 0 {
		return nil
	}
	for _, e := range errs[1:] {
		l.Warn("another failure", "code", e.Code, "err", e.Msg)
	}
	return errs[0]
}

// deleteVeth deletes the attachment's veth pair: by its host end in the node's namespace
// or, if that is gone, by the pod's end ifName in netnsPath when the namespace is still
// there.
func deleteVeth(netnsPath, hostName, ifName string) error {
	host, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink in the node's namespace: %w", err)
	}
	defer host.Close()
	found, err := deleteLink(host, hostName)
	if err != nil || found || netnsPath == "" {
		return err
	}
	podNS, err := ns.GetNS(netnsPath)
	if err != nil {
		// The namespace is gone, and its end of the pair with it.
		return nil
	}
	defer podNS.Close()
	pod, err := netlink.NewHandleAt(netns.NsHandle(podNS.Fd()), unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", netnsPath, err)
	}
	defer pod.Close()
	l, err := pod.LinkByName(ifName)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up %s in %s: %w", ifName, netnsPath, err)
	}
	if _, ok := l.(*netlink.Veth); !ok {
		return nil
	}
	if err := pod.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("delete %s in %s: %w", ifName, netnsPath, err)
	}
	return nil
}
