package ipamd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"

	"github.com/kubelab/kubelab/internal/util/netns"
)

// SNATTable is the nftables table (family ip) of the node's pod SNAT, in the node's
// namespace: pod traffic to addresses outside the VPC leaves with the node's primary
// address, as aws-node's SNAT rules do with AWS_VPC_K8S_CNI_EXTERNALSNAT=false.
const SNATTable = "kubelab-aws-snat"

// Marks and rule priorities of the node's policy routing, aws-node's.
const (
	// outboundMark marks pod packets for outside the VPC: they are routed by the main
	// table (out of eth0) whichever ENI the pod's address is on, and SNATed there.
	outboundMark = 0x80
	// mainRulePriority is the rule "fwmark 0x80/0x80 lookup main".
	mainRulePriority = 1024
	// HostVethPrefix begins the node-side names of the pods' veths in VPC mode.
	HostVethPrefix = "eni"
)

// network is what the manager changes in the node's namespace.
type network interface {
	// setupHost sets up the node-wide rules, for the node's primary address.
	setupHost(primary netip.Addr) error
	// setupENI brings up a secondary ENI's interface with its route table.
	setupENI(e *eniState) error
	// teardownENI removes a secondary ENI's route table.
	teardownENI(e *eniState) error
}

type noNetwork struct{}

func (noNetwork) setupHost(netip.Addr) error { return nil }
func (noNetwork) setupENI(*eniState) error   { return nil }
func (noNetwork) teardownENI(*eniState) error {
	return nil
}

// nodeNetwork changes the node's namespace at path.
type nodeNetwork struct {
	path   string
	vpc    netip.Prefix
	router netip.Addr
	logger *slog.Logger
}

// snatRules are the SNAT table's content for the node's primary address.
func snatRules(tx *knftables.Transaction, vpc netip.Prefix, primary netip.Addr) {
	tx.Add(&knftables.Table{Comment: knftables.PtrTo("pod SNAT to the node's primary address (VPC mode)")})
	mark := fmt.Sprintf("0x%x", outboundMark)
	chains := []struct {
		name     string
		typ      knftables.BaseChainType
		hook     knftables.BaseChainHook
		priority knftables.BaseChainPriority
		rule     string
	}{
		// After the Service DNAT: a Service's pod endpoint is inside the VPC.
		{"prerouting", knftables.FilterType, knftables.PreroutingHook, "-90",
			knftables.Concat("iifname", `"`+HostVethPrefix+`*"`, "ip daddr !=", vpc.String(), "meta mark set meta mark or", mark)},
		{"postrouting", knftables.NATType, knftables.PostroutingHook, knftables.SNATPriority,
			knftables.Concat("meta mark &", mark, "==", mark, "ip daddr !=", vpc.String(), "snat to", primary.String())},
	}
	for _, c := range chains {
		tx.Add(&knftables.Chain{Name: c.name, Type: knftables.PtrTo(c.typ), Hook: knftables.PtrTo(c.hook), Priority: knftables.PtrTo(c.priority)})
		tx.Flush(&knftables.Chain{Name: c.name})
		tx.Add(&knftables.Rule{Chain: c.name, Rule: c.rule})
	}
}

func (n *nodeNetwork) setupHost(primary netip.Addr) error {
	nft, err := netns.NFTables(n.path, knftables.IPv4Family, SNATTable)
	if err != nil {
		return fmt.Errorf("nftables in %s: %w", n.path, err)
	}
	tx := nft.NewTransaction()
	snatRules(tx, n.vpc, primary)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := nft.Run(ctx, tx); err != nil {
		return fmt.Errorf("snat rules: %w", err)
	}
	return netns.Do(n.path, func() error {
		// Loose reverse-path filtering: a pod's replies may come in on another ENI
		// than the one its address is on.
		if err := os.WriteFile("/proc/sys/net/ipv4/conf/all/rp_filter", []byte("2"), 0o644); err != nil {
			return fmt.Errorf("sysctl rp_filter: %w", err)
		}
		rule := netlink.NewRule()
		rule.Priority = mainRulePriority
		rule.Mark = outboundMark
		rule.Mask = ptr(uint32(outboundMark))
		rule.Table = unix.RT_TABLE_MAIN
		if err := netlink.RuleAdd(rule); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("rule fwmark %#x lookup main: %w", outboundMark, err)
		}
		return nil
	})
}

func ptr[T any](v T) *T { return &v }

// linkByMAC finds the interface with mac, waiting up to timeout for it to appear.
func linkByMAC(mac string, timeout time.Duration) (netlink.Link, error) {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return nil, fmt.Errorf("mac %q: %w", mac, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		links, err := netlink.LinkList()
		if err != nil {
			return nil, err
		}
		for _, l := range links {
			if l.Attrs().HardwareAddr.String() == hw.String() {
				return l, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no interface with mac %s", mac)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (n *nodeNetwork) setupENI(e *eniState) error {
	table := RouteTable(e.DeviceNumber)
	return netns.Do(n.path, func() error {
		l, err := linkByMAC(e.MAC, 10*time.Second)
		if err != nil {
			return fmt.Errorf("ENI %s: %w", e.ID, err)
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return fmt.Errorf("set %s up: %w", l.Attrs().Name, err)
		}
		if err := ensureENIAddr(l, e); err != nil {
			return err
		}
		// Everything from the ENI's pods goes through the VPC's router, as in aws-node's
		// tables: the router reaches the VPC's addresses, its NAT gateway the rest.
		routes := []*netlink.Route{
			{LinkIndex: l.Attrs().Index, Dst: prefixNet(netip.PrefixFrom(n.router, 32)), Scope: netlink.SCOPE_LINK, Table: table},
			{LinkIndex: l.Attrs().Index, Gw: n.router.AsSlice(), Table: table,
				Dst: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}},
		}
		for _, r := range routes {
			if err := netlink.RouteReplace(r); err != nil {
				return fmt.Errorf("route %v in table %d: %w", r.Dst, table, err)
			}
		}
		n.logger.Info("ENI set up", "eni", e.ID, "link", l.Attrs().Name, "device", e.DeviceNumber, "table", table)
		return nil
	})
}

// ensureENIAddr gives the ENI's interface l its primary address, without the subnet's
// route in main (eth0 has that one), unless it has the address already (the VPC gives it
// when it attaches the interface).
func ensureENIAddr(l netlink.Link, e *eniState) error {
	if !e.PrimaryIP.IsValid() {
		return nil
	}
	addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("addresses of %s: %w", l.Attrs().Name, err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap() == e.PrimaryIP {
			return nil
		}
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: e.PrimaryIP.AsSlice(), Mask: net.CIDRMask(e.SubnetCIDR.Bits(), 32)},
		Flags: unix.IFA_F_NOPREFIXROUTE}
	if err := netlink.AddrAdd(l, addr); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("address %s on %s: %w", e.PrimaryIP, l.Attrs().Name, err)
	}
	return nil
}

func (n *nodeNetwork) teardownENI(e *eniState) error {
	table := RouteTable(e.DeviceNumber)
	return netns.Do(n.path, func() error {
		routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return err
		}
		var errs []error
		for _, r := range routes {
			if err := netlink.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Masked().Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}
}
