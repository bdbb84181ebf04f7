package proxy

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kubelab/kubelab/internal/util/netns"
)

// UDPPort is what the conntrack cleanup needs to know of a UDP Service port: UDP has no
// connection to end, so a conntrack entry keeps sending a client's datagrams to the
// endpoint (or to the reject) it was first given until the entry times out.
type UDPPort struct {
	ClusterIP string
	Port      int32
	// NodePort is 0 without one.
	NodePort int32
	// Endpoints are the addresses of the endpoints the port's traffic can go to.
	Endpoints []string
}

// staleFlow selects UDP conntrack entries: those whose original destination is IP:Port
// (any address of the node when IP is ""), and, when Endpoint is set, only those the
// endpoint answers (the DNAT went to it).
type staleFlow struct {
	IP       string
	Port     int32
	Endpoint string
}

// staleUDPFlows are the UDP conntrack entries to delete when a Service goes from old to
// cur (nil: it does not exist): those to endpoints a port no longer has, and those of a
// port that had no endpoints and has some now (its datagrams were rejected until now).
func staleUDPFlows(old, cur *ServiceState) []staleFlow {
	var flows []staleFlow
	type key struct {
		ip         string
		port, node int32
	}
	before := map[key][]string{}
	if old != nil {
		for _, p := range old.UDP {
			before[key{p.ClusterIP, p.Port, p.NodePort}] = p.Endpoints
		}
	}
	now := map[key][]string{}
	if cur != nil {
		for _, p := range cur.UDP {
			now[key{p.ClusterIP, p.Port, p.NodePort}] = p.Endpoints
		}
	}
	both := func(k key, endpoint string) {
		flows = append(flows, staleFlow{IP: k.ip, Port: k.port, Endpoint: endpoint})
		if k.node != 0 {
			flows = append(flows, staleFlow{Port: k.node, Endpoint: endpoint})
		}
	}
	for k, eps := range before {
		for _, e := range eps {
			if !slices.Contains(now[k], e) {
				both(k, e)
			}
		}
	}
	for k, eps := range now {
		if len(eps) > 0 && len(before[k]) == 0 {
			both(k, "")
		}
	}
	slices.SortFunc(flows, func(a, b staleFlow) int {
		return cmp.Or(strings.Compare(a.IP, b.IP), cmp.Compare(a.Port, b.Port), strings.Compare(a.Endpoint, b.Endpoint))
	})
	return slices.Compact(flows)
}

// deleteUDPFlows deletes the conntrack entries of flows in the namespace at path ("": the
// caller's).
func deleteUDPFlows(path string, flows []staleFlow) error {
	if len(flows) == 0 {
		return nil
	}
	filters := make([]netlink.CustomConntrackFilter, 0, len(flows))
	for _, fl := range flows {
		f := &netlink.ConntrackFilter{}
		err := f.AddProtocol(unix.IPPROTO_UDP)
		if err == nil {
			err = f.AddPort(netlink.ConntrackOrigDstPort, uint16(fl.Port))
		}
		if err == nil && fl.IP != "" {
			err = f.AddIP(netlink.ConntrackOrigDstIP, net.ParseIP(fl.IP))
		}
		if err == nil && fl.Endpoint != "" {
			err = f.AddIP(netlink.ConntrackReplySrcIP, net.ParseIP(fl.Endpoint))
		}
		if err != nil {
			return fmt.Errorf("conntrack filter %+v: %w", fl, err)
		}
		filters = append(filters, f)
	}
	return netns.Do(path, func() error {
		if _, err := netlink.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, filters...); err != nil {
			return fmt.Errorf("delete UDP conntrack entries: %w", err)
		}
		return nil
	})
}
