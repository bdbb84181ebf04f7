package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kubelab/kubelab/internal/cni/ipam"
	"github.com/kubelab/kubelab/internal/util/ipamdapi"
)

// VPC mode: the pod's address is a secondary IP of one of the node's ENIs, which the
// node's IP address manager gives; the pod's veth is routed, not bridged.

// PodGateway is the pods' gateway in VPC mode: a link-local address that nothing has,
// reached on-link through a permanent neighbour entry for the host end's MAC, as the AWS
// VPC CNI does it.
var PodGateway = netip.MustParseAddr("169.254.1.1")

// Priorities of the pods' policy-routing rules in VPC mode, aws-node's: traffic to a pod
// goes by main (its /32 route), traffic from a pod whose address is on a secondary ENI by
// that ENI's table.
const (
	toPodRulePriority   = 512
	fromPodRulePriority = 1536
	mainTable           = unix.RT_TABLE_MAIN
)

func (p *Plugin) ipamd(conf *NetConf) *ipamdapi.Client {
	return ipamdapi.NewClient(conf.IPAMDSocket, p.cfg.Timeout)
}

// ipamdError is the CNI error of a failed request to the node's IP address manager.
func ipamdError(what string, err error) *types.Error {
	if ipamdapi.IsCode(err, ipamdapi.CodeNoAvailableIP) {
		return types.NewError(CodeRangeFull, err.Error(), "")
	}
	return cniErrorf(CodeIPAMD, "%s: %v", what, err)
}

// podArgs reads the pod's namespace and name from CNI_ARGS.
func podArgs(args string) (namespace, name string) {
	for _, kv := range strings.Split(args, ";") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "K8S_POD_NAMESPACE":
			namespace = v
		case "K8S_POD_NAME":
			name = v
		}
	}
	return namespace, name
}

func hostPrefix(a netip.Addr) *net.IPNet {
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(32, 32)}
}

// podRules are the pod's policy-routing rules: to it by main, and from it by its ENI's
// table when that is not main.
func podRules(ip netip.Addr, table int) []*netlink.Rule {
	to := netlink.NewRule()
	to.Priority, to.Dst, to.Table = toPodRulePriority, hostPrefix(ip), mainTable
	rules := []*netlink.Rule{to}
	if table != mainTable {
		from := netlink.NewRule()
		from.Priority, from.Src, from.Table = fromPodRulePriority, hostPrefix(ip), table
		rules = append(rules, from)
	}
	return rules
}

// deletePodRules deletes every rule of the plugin's priorities to or from ip.
func deletePodRules(h *netlink.Handle, ip netip.Addr) error {
	rules, err := retryDump(func() ([]netlink.Rule, error) { return h.RuleList(netlink.FAMILY_V4) })
	if err != nil {
		return fmt.Errorf("list rules: %w", err)
	}
	var errs []error
	for _, r := range rules {
		if isPodRuleOf(r, ip) {
			if err := h.RuleDel(&r); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("delete rule %v: %w", r, err))
			}
		}
	}
	return errors.Join(errs...)
}

// isPodRuleOf says whether r is one of podRules' for ip (any ip when invalid).
func isPodRuleOf(r netlink.Rule, ip netip.Addr) bool {
	match := func(n *net.IPNet) bool {
		if n == nil {
			return false
		}
		ones, _ := n.Mask.Size()
		a, ok := netip.AddrFromSlice(n.IP)
		return ok && ones == 32 && (!ip.IsValid() || a.Unmap() == ip)
	}
	return r.Priority == toPodRulePriority && match(r.Dst) || r.Priority == fromPodRulePriority && match(r.Src)
}

func (p *Plugin) addVPC(ctx context.Context, conf *NetConf, args *skel.CmdArgs) (_ *types100.Result, err error) {
	a := ipam.Attachment{ContainerID: args.ContainerID, IfName: args.IfName}
	n, err := openForAdd(args)
	if err != nil {
		return nil, err
	}
	defer n.close()

	var undo []func()
	defer func() {
		if err == nil {
			return
		}
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}()
	client := p.ipamd(conf)
	podNS, podName := podArgs(args.Args)
	att := ipamdapi.Attachment{ContainerID: a.ContainerID, IfName: a.IfName}
	asg, err := client.Add(ctx, ipamdapi.AddRequest{Attachment: att, NetworkName: conf.Name, PodNamespace: podNS, PodName: podName})
	if err != nil {
		return nil, ipamdError("get an address from the node's IP address manager", err)
	}
	undo = append(undo, func() {
		rctx, cancel := context.WithTimeout(context.Background(), p.cfg.Timeout)
		defer cancel()
		_, rerr := client.Del(rctx, att)
		logErr(p.cfg.Logger, "roll back: release address", rerr, "container", a.ContainerID, "ip", asg.IP)
	})
	ip, err := netip.ParseAddr(asg.IP)
	if err != nil || !ip.Is4() {
		return nil, cniErrorf(CodeIPAMD, "the node's IP address manager gave %q, not an IPv4 address", asg.IP)
	}

	hostName := VPCHostVethName(args.ContainerID, args.IfName)
	undo = append(undo, func() {
		_, derr := deleteLink(n.host, hostName)
		logErr(p.cfg.Logger, "roll back: delete veth", derr, "container", a.ContainerID, "veth", hostName)
	})
	veth, err := createVeth(n.host, int(n.podNS.Fd()), hostName, args.IfName, conf.MTU, nil, false)
	if errors.Is(err, errVethExists) {
		found, derr := deleteLink(n.host, hostName)
		if derr != nil {
			return nil, cniErrorf(CodeNodeNetwork, "remove leftover %v", derr)
		}
		if found {
			p.cfg.Logger.Info("removed leftover veth", "container", a.ContainerID, "veth", hostName)
			veth, err = createVeth(n.host, int(n.podNS.Fd()), hostName, args.IfName, conf.MTU, nil, false)
		}
	}
	if err != nil {
		return nil, cniErrorf(CodeNodeNetwork, "%v", err)
	}
	if err := configureVPCPod(n.pod, args.IfName, ip, veth.HardwareAddr); err != nil {
		return nil, cniErrorf(CodeNodeNetwork, "%v", err)
	}
	hostLink, err := n.host.LinkByName(hostName)
	if err != nil {
		return nil, cniErrorf(CodeNodeNetwork, "host end %s: %v", hostName, err)
	}
	if err := n.host.RouteReplace(&netlink.Route{LinkIndex: hostLink.Attrs().Index, Dst: hostPrefix(ip), Scope: netlink.SCOPE_LINK}); err != nil {
		return nil, cniErrorf(CodeNodeNetwork, "route %s/32 to %s: %v", ip, hostName, err)
	}
	undo = append(undo, func() {
		logErr(p.cfg.Logger, "roll back: delete rules", deletePodRules(n.host, ip), "container", a.ContainerID, "ip", ip)
	})
	if err := deletePodRules(n.host, ip); err != nil { // a killed ADD's or an earlier pod's
		return nil, cniErrorf(CodeNodeNetwork, "%v", err)
	}
	for _, r := range podRules(ip, asg.RouteTable) {
		if err := n.host.RuleAdd(r); err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, cniErrorf(CodeNodeNetwork, "add rule %v: %v", r, err)
		}
	}

	if len(conf.ports) > 0 {
		undo = append(undo, func() {
			rctx, cancel := context.WithTimeout(context.Background(), p.cfg.Timeout)
			defer cancel()
			terr := p.teardownHostPorts(rctx, conf.DataDir, hostPortChain(a.ContainerID, a.IfName), true)
			logErr(p.cfg.Logger, "roll back: remove hostPorts", terr, "container", a.ContainerID)
		})
		if err := p.setupHostPorts(ctx, conf, a, ip); err != nil {
			return nil, cniErrorf(CodeHostPort, "set up hostPorts of %s: %v", ip, err)
		}
	}
	return &types100.Result{
		CNIVersion: types100.ImplementedSpecVersion,
		Interfaces: []*types100.Interface{
			{Name: veth.Name, Mac: veth.HardwareAddr.String()},
			{Name: veth.PeerName, Mac: veth.PeerHardwareAddr.String(), Sandbox: args.Netns},
		},
		IPs: []*types100.IPConfig{{Interface: types100.Int(1), Address: *hostPrefix(ip), Gateway: PodGateway.AsSlice()}},
		Routes: []*types.Route{{
			Dst: net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)},
			GW:  PodGateway.AsSlice(),
		}},
	}, nil
}

// configureVPCPod gives the pod's interface its address as a /32, sets it up, and routes
// everything via PodGateway on-link, whose MAC is the host end's (gwMAC).
func configureVPCPod(pod *netlink.Handle, ifName string, ip netip.Addr, gwMAC net.HardwareAddr) error {
	l, err := pod.LinkByName(ifName)
	if err != nil {
		return fmt.Errorf("pod interface %s: %w", ifName, err)
	}
	if err := pod.AddrAdd(l, &netlink.Addr{IPNet: hostPrefix(ip)}); err != nil {
		return fmt.Errorf("add %s/32 to pod interface %s: %w", ip, ifName, err)
	}
	if err := pod.LinkSetUp(l); err != nil {
		return fmt.Errorf("set pod interface %s up: %w", ifName, err)
	}
	idx := l.Attrs().Index
	if err := pod.RouteAdd(&netlink.Route{LinkIndex: idx, Dst: hostPrefix(PodGateway), Scope: netlink.SCOPE_LINK}); err != nil {
		return fmt.Errorf("route to the gateway %s on %s: %w", PodGateway, ifName, err)
	}
	if err := pod.RouteAdd(&netlink.Route{LinkIndex: idx, Gw: PodGateway.AsSlice(),
		Dst: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}}); err != nil {
		return fmt.Errorf("default route via %s on %s: %w", PodGateway, ifName, err)
	}
	if err := pod.NeighSet(&netlink.Neigh{LinkIndex: idx, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
		IP: PodGateway.AsSlice(), HardwareAddr: gwMAC}); err != nil {
		return fmt.Errorf("neighbour %s on %s: %w", PodGateway, ifName, err)
	}
	return nil
}

func (p *Plugin) delVPC(ctx context.Context, conf *NetConf, args *skel.CmdArgs) error {
	a := ipam.Attachment{ContainerID: args.ContainerID, IfName: args.IfName}
	var errs []*types.Error
	if err := p.teardownHostPorts(ctx, conf.DataDir, hostPortChain(a.ContainerID, a.IfName), len(conf.ports) > 0); err != nil {
		errs = append(errs, cniErrorf(CodeHostPort, "remove hostPorts of container %s: %v", a.ContainerID, err))
	}
	if err := deleteVeth(args.Netns, VPCHostVethName(a.ContainerID, a.IfName), a.IfName); err != nil {
		errs = append(errs, cniErrorf(CodeNodeNetwork, "%v", err))
	}
	rel, err := p.ipamd(conf).Del(ctx, ipamdapi.Attachment{ContainerID: a.ContainerID, IfName: a.IfName})
	if err != nil {
		errs = append(errs, ipamdError("release the address", err))
	} else if rel.Found {
		if ip, perr := netip.ParseAddr(rel.IP); perr == nil {
			if err := withHostHandle(func(h *netlink.Handle) error { return deletePodRules(h, ip) }); err != nil {
				errs = append(errs, cniErrorf(CodeNodeNetwork, "%v", err))
			}
		}
		p.cfg.Logger.Debug("released", "container", a.ContainerID, "ifname", a.IfName, "ip", rel.IP)
	}
	return firstError(p.cfg.Logger, errs)
}

func withHostHandle(f func(*netlink.Handle) error) error {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink in the node's namespace: %w", err)
	}
	defer h.Close()
	return f(h)
}

func (p *Plugin) checkVPC(ctx context.Context, conf *NetConf, args *skel.CmdArgs) error {
	asg, err := p.ipamd(conf).Lookup(ctx, ipamdapi.Attachment{ContainerID: args.ContainerID, IfName: args.IfName})
	if ipamdapi.IsCode(err, ipamdapi.CodeNotFound) {
		return cniErrorf(CodeCheckFailed, "the node's IP address manager holds no address for container %s interface %s", args.ContainerID, args.IfName)
	}
	if err != nil {
		return ipamdError("look up the address", err)
	}
	ip, err := netip.ParseAddr(asg.IP)
	if err != nil {
		return cniErrorf(CodeIPAMD, "the node's IP address manager gave %q, not an address", asg.IP)
	}
	podAddr := netip.PrefixFrom(ip, 32)
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
	hostName := VPCHostVethName(args.ContainerID, args.IfName)
	hl, err := n.host.LinkByName(hostName)
	if err != nil {
		return cniErrorf(CodeCheckFailed, "host end %s of the pod's veth: %v", hostName, err)
	}
	routes, err := retryDump(func() ([]netlink.Route, error) { return n.host.RouteList(hl, netlink.FAMILY_V4) })
	if err != nil {
		return cniErrorf(CodeNodeNetwork, "routes of %s: %v", hostName, err)
	}
	if !hasRouteTo(routes, podAddr) {
		return cniErrorf(CodeCheckFailed, "no route to %s via %s", podAddr, hostName)
	}
	rules, err := retryDump(func() ([]netlink.Rule, error) { return n.host.RuleList(netlink.FAMILY_V4) })
	if err != nil {
		return cniErrorf(CodeNodeNetwork, "rules: %v", err)
	}
	for _, want := range podRules(ip, asg.RouteTable) {
		found := false
		for _, r := range rules {
			found = found || isPodRuleOf(r, ip) && r.Priority == want.Priority && r.Table == want.Table
		}
		if !found {
			return cniErrorf(CodeCheckFailed, "no rule of priority %d for %s (table %d)", want.Priority, ip, want.Table)
		}
	}
	pl, err := n.pod.LinkByName(args.IfName)
	if err != nil {
		return cniErrorf(CodeCheckFailed, "pod interface %s in %s: %v", args.IfName, args.Netns, err)
	}
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return n.pod.AddrList(pl, netlink.FAMILY_V4) })
	if err != nil {
		return cniErrorf(CodeNodeNetwork, "addresses of %s: %v", args.IfName, err)
	}
	if !hasAddr(addrs, podAddr) {
		return cniErrorf(CodeCheckFailed, "pod interface %s does not have its address %s", args.IfName, podAddr)
	}
	podRoutes, err := retryDump(func() ([]netlink.Route, error) { return n.pod.RouteList(pl, netlink.FAMILY_V4) })
	if err != nil {
		return cniErrorf(CodeNodeNetwork, "routes of %s: %v", args.IfName, err)
	}
	if !hasDefaultRoute(podRoutes, PodGateway) {
		return cniErrorf(CodeCheckFailed, "pod interface %s has no default route via %s", args.IfName, PodGateway)
	}
	return nil
}

func hasRouteTo(routes []netlink.Route, dst netip.Prefix) bool {
	for _, r := range routes {
		if r.Dst != nil && r.Dst.String() == dst.String() {
			return true
		}
	}
	return false
}

// gcVPC releases, through the node's IP address manager, every address held for an
// attachment not in valid, and removes the plugin's veths and rules that no valid
// attachment has.
func (p *Plugin) gcVPC(ctx context.Context, conf *NetConf) []*types.Error {
	var errs []*types.Error
	client := p.ipamd(conf)
	valid := make([]ipamdapi.Attachment, 0, len(conf.ValidAttachments))
	for _, a := range conf.ValidAttachments {
		valid = append(valid, ipamdapi.Attachment{ContainerID: a.ContainerID, IfName: a.IfName})
	}
	rep, err := client.GC(ctx, valid)
	if err != nil {
		return append(errs, ipamdError("gc addresses", err))
	}
	for _, ip := range rep.Released {
		p.cfg.Logger.Info("gc: released address", "ip", ip)
	}
	live := map[netip.Addr]bool{}
	keep := map[string]bool{}
	for _, a := range valid {
		keep[VPCHostVethName(a.ContainerID, a.IfName)] = true
		asg, err := client.Lookup(ctx, a)
		if err != nil {
			continue
		}
		if ip, err := netip.ParseAddr(asg.IP); err == nil {
			live[ip] = true
		}
	}
	err = withHostHandle(func(h *netlink.Handle) error {
		var errs []error
		links, err := retryDump(h.LinkList)
		if err != nil {
			return err
		}
		for _, l := range links {
			if name := l.Attrs().Name; isVPCHostVethName(name) && !keep[name] {
				if err := h.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
					errs = append(errs, err)
					continue
				}
				p.cfg.Logger.Info("gc: deleted veth", "veth", name)
			}
		}
		rules, err := retryDump(func() ([]netlink.Rule, error) { return h.RuleList(netlink.FAMILY_V4) })
		if err != nil {
			return err
		}
		for _, r := range rules {
			if !isPodRuleOf(r, netip.Addr{}) {
				continue
			}
			n := r.Dst
			if r.Priority == fromPodRulePriority {
				n = r.Src
			}
			if a, ok := netip.AddrFromSlice(n.IP); ok && !live[a.Unmap()] {
				if err := h.RuleDel(&r); err != nil && !errors.Is(err, unix.ENOENT) {
					errs = append(errs, err)
				}
			}
		}
		return errors.Join(errs...)
	})
	if err != nil {
		errs = append(errs, cniErrorf(CodeNodeNetwork, "gc veths and rules: %v", err))
	}
	return errs
}
