package plugin

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/kubelab/kubelab/internal/cni/ipam"
)

// Add connects a pod to the node's bridge: ADD.
func (p *Plugin) Add(args *skel.CmdArgs) error {
	conf, err := LoadNetConf(args.StdinData)
	if err != nil {
		return err
	}
	ctx, cancel := p.context()
	defer cancel()
	start := time.Now()
	add := p.add
	if conf.vpc() {
		add = p.addVPC
	}
	result, err := add(ctx, conf, args)
	if err != nil {
		p.cfg.Logger.Warn("add failed", "container", args.ContainerID, "ifname", args.IfName, "err", err)
		return err
	}
	p.cfg.Logger.Debug("added", "container", args.ContainerID, "ifname", args.IfName, "ip", result.IPs[0].Address.String(), "took", time.Since(start))
	return p.print(result, conf.CNIVersion)
}

// namespaces are the netlink handles of one verb: host in the node's namespace (the
// calling thread's), pod in CNI_NETNS.
type namespaces struct {
	podNS ns.NetNS
	host  *netlink.Handle
	pod   *netlink.Handle
}

func (n *namespaces) close() {
	if n.pod != nil {
		n.pod.Close()
	}
	if n.host != nil {
		n.host.Close()
	}
	if n.podNS != nil {
		_ = n.podNS.Close()
	}
}

// openNamespaces opens CNI_NETNS and the netlink handles; a netns that cannot be opened,
// or that is the node's own, is a CNI error of code 4.
func openNamespaces(netnsPath string) (*namespaces, error) {
	n := &namespaces{}
	var err error
	if n.podNS, err = ns.GetNS(netnsPath); err != nil {
		return nil, cniErrorf(types.ErrInvalidEnvironmentVariables, "CNI_NETNS %q: %v", netnsPath, err)
	}
	if n.host, err = netlink.NewHandle(unix.NETLINK_ROUTE); err != nil {
		n.close()
		return nil, cniErrorf(CodeNodeNetwork, "netlink in the node's namespace: %v", err)
	}
	self, err := netns.Get()
	if err != nil {
		n.close()
		return nil, cniErrorf(CodeNodeNetwork, "the plugin's namespace: %v", err)
	}
	same := self.Equal(netns.NsHandle(n.podNS.Fd()))
	_ = self.Close()
	if same {
		n.close()
		return nil, cniErrorf(types.ErrInvalidEnvironmentVariables, "CNI_NETNS %q is the node's own namespace, not a pod's", netnsPath)
	}
	if n.pod, err = netlink.NewHandleAt(netns.NsHandle(n.podNS.Fd()), unix.NETLINK_ROUTE); err != nil {
		n.close()
		return nil, cniErrorf(CodeNodeNetwork, "netlink in CNI_NETNS %q: %v", netnsPath, err)
	}
	return n, nil
}

// openForAdd opens the namespaces of an ADD, whose interface must not exist yet in the
// pod's namespace (CodeInterfaceExists when it does).
func openForAdd(args *skel.CmdArgs) (*namespaces, error) {
	n, err := openNamespaces(args.Netns)
	if err != nil {
		return nil, err
	}
	if _, err := n.pod.LinkByName(args.IfName); err == nil {
		n.close()
		return nil, cniErrorf(CodeInterfaceExists, "interface %s already exists in %s", args.IfName, args.Netns)
	} else if !isNotFound(err) {
		n.close()
		return nil, cniErrorf(CodeNodeNetwork, "look up %s in %s: %v", args.IfName, args.Netns, err)
	}
	return n, nil
}

func (p *Plugin) add(ctx context.Context, conf *NetConf, args *skel.CmdArgs) (_ *types100.Result, err error) {
	a := ipam.Attachment{ContainerID: args.ContainerID, IfName: args.IfName}
	n, err := openForAdd(args)
	if err != nil {
		return nil, err
	}
	defer n.close()
	store, err := ipam.New(ipam.Config{Dir: conf.DataDir, Subnet: conf.subnet})
	if err != nil {
		return nil, ipamError("open ipam store", err)
	}
	gw := conf.rng.Gateway
	br, err := ensureBridge(n.host, conf.Bridge, conf.MTU, netip.PrefixFrom(gw, conf.subnet.Bits()))
	if err != nil {
		return nil, cniErrorf(CodeNodeNetwork, "%v", err)
	}

	// From here on every step is undone, in reverse, if a later one fails.
	var undo []func()
	defer func() {
		if err == nil {
			return
		}
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}()
	addr, err := store.Allocate(ctx, a)
	if err != nil {
		return nil, ipamError("allocate an address", err)
	}
	undo = append(undo, func() {
		rctx, cancel := context.WithTimeout(context.Background(), p.cfg.Timeout)
		defer cancel()
		_, rerr := store.Release(rctx, a)
		logErr(p.cfg.Logger, "roll back: release address", rerr, "container", a.ContainerID, "ip", addr)
	})

	hostName := HostVethName(args.ContainerID, args.IfName)
	undo = append(undo, func() {
		_, derr := deleteLink(n.host, hostName)
		logErr(p.cfg.Logger, "roll back: delete veth", derr, "container", a.ContainerID, "veth", hostName)
	})
	veth, err := createVeth(n.host, int(n.podNS.Fd()), hostName, args.IfName, conf.MTU, br, *conf.HairpinMode)
	if errors.Is(err, errVethExists) {
		// A veth of this attachment left by an ADD that was killed halfway.
		found, derr := deleteLink(n.host, hostName)
		if derr != nil {
			return nil, cniErrorf(CodeNodeNetwork, "remove leftover %v", derr)
		}
		if found {
			p.cfg.Logger.Info("removed leftover veth", "container", a.ContainerID, "veth", hostName)
			veth, err = createVeth(n.host, int(n.podNS.Fd()), hostName, args.IfName, conf.MTU, br, *conf.HairpinMode)
		}
	}
	if err != nil {
		return nil, cniErrorf(CodeNodeNetwork, "%v", err)
	}
	podAddr := netip.PrefixFrom(addr, conf.subnet.Bits())
	if err := configurePod(n.pod, args.IfName, podAddr, gw); err != nil {
		return nil, cniErrorf(CodeNodeNetwork, "%v", err)
	}

	if len(conf.ports) > 0 {
		undo = append(undo, func() {
			rctx, cancel := context.WithTimeout(context.Background(), p.cfg.Timeout)
			defer cancel()
			terr := p.teardownHostPorts(rctx, conf.DataDir, hostPortChain(a.ContainerID, a.IfName), true)
			logErr(p.cfg.Logger, "roll back: remove hostPorts", terr, "container", a.ContainerID)
		})
		if err := p.setupHostPorts(ctx, conf, a, addr); err != nil {
			return nil, cniErrorf(CodeHostPort, "set up hostPorts of %s: %v", addr, err)
		}
	}
	return buildResult(br, veth, args.Netns, podAddr, gw), nil
}

// buildResult is ADD's result: the bridge, the host end and the pod's interface (veth's
// peer), the pod's address with its gateway, and its default route.
func buildResult(br *netlink.Bridge, veth *netlink.Veth, netnsPath string, addr netip.Prefix, gw netip.Addr) *types100.Result {
	return &types100.Result{
		CNIVersion: types100.ImplementedSpecVersion,
		Interfaces: []*types100.Interface{
			{Name: br.Attrs().Name, Mac: br.Attrs().HardwareAddr.String()},
			{Name: veth.Name, Mac: veth.HardwareAddr.String()},
			{Name: veth.PeerName, Mac: veth.PeerHardwareAddr.String(), Sandbox: netnsPath},
		},
		IPs: []*types100.IPConfig{{
			Interface: types100.Int(2),
			Address:   *prefixToIPNet(addr),
			Gateway:   gw.AsSlice(),
		}},
		Routes: []*types.Route{{
			Dst: net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)},
			GW:  gw.AsSlice(),
		}},
	}
}
