package overlay

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Annotations the agent publishes on its own Node and reads from the others.
const (
	// AnnotationVTEPMAC is the MAC address of the node's VXLAN device (vxlan mode).
	AnnotationVTEPMAC = "kubelab.io/vtep-mac"
	// AnnotationNodeIP is the node's underlay IPv4 address, the VXLAN tunnel's
	// endpoint and, in direct mode, the next hop to its pod subnet.
	AnnotationNodeIP = "kubelab.io/node-ip"
)

// errIncomplete says a remote node lacks what its entries need (a podCIDR or the
// annotations its agent publishes); its entries follow once it has them.
var errIncomplete = errors.New("node is not ready for the overlay")

// neighbour maps a remote subnet's .0 address to the remote VTEP MAC on the VXLAN
// device.
type neighbour struct {
	IP  netip.Addr
	MAC string
}

// fdbEntry sends frames for a remote VTEP MAC to the remote node's address.
type fdbEntry struct {
	MAC string
	Dst netip.Addr
}

// route sends a remote pod subnet via Via out of Dev: onlink over the VXLAN device
// in vxlan mode, over the underlay in direct mode.
type route struct {
	Dst netip.Prefix
	Via netip.Addr
	Dev string
}

// entries is a set of kernel entries the agent owns.
type entries struct {
	Neighbours []neighbour
	FDB        []fdbEntry
	Routes     []route
}

func (e entries) empty() bool {
	return len(e.Neighbours) == 0 && len(e.FDB) == 0 && len(e.Routes) == 0
}

// plus returns the entries of e and o.
func (e entries) plus(o entries) entries {
	return entries{
		Neighbours: append(slices.Clone(e.Neighbours), o.Neighbours...),
		FDB:        append(slices.Clone(e.FDB), o.FDB...),
		Routes:     append(slices.Clone(e.Routes), o.Routes...),
	}
}

// String lists e as iproute2 would show the entries, in a stable order.
func (e entries) String() string {
	e = e.sorted()
	var parts []string
	for _, n := range e.Neighbours {
		parts = append(parts, fmt.Sprintf("neigh %s lladdr %s", n.IP, n.MAC))
	}
	for _, f := range e.FDB {
		parts = append(parts, fmt.Sprintf("fdb %s dst %s", f.MAC, f.Dst))
	}
	for _, r := range e.Routes {
		parts = append(parts, fmt.Sprintf("route %s via %s dev %s", r.Dst, r.Via, r.Dev))
	}
	return strings.Join(parts, "; ")
}

// sorted returns e in a stable order (for logs and tests).
func (e entries) sorted() entries {
	e = entries{Neighbours: slices.Clone(e.Neighbours), FDB: slices.Clone(e.FDB), Routes: slices.Clone(e.Routes)}
	slices.SortFunc(e.Neighbours, func(a, b neighbour) int { return a.IP.Compare(b.IP) })
	slices.SortFunc(e.FDB, func(a, b fdbEntry) int { return cmp.Compare(a.MAC, b.MAC) })
	slices.SortFunc(e.Routes, func(a, b route) int { return a.Dst.Addr().Compare(b.Dst.Addr()) })
	return e
}

// stale returns the entries of have whose key (a neighbour's IP, an FDB entry's
// MAC, a route's destination) is in none of want: those must be deleted. An entry
// whose key is still wanted with another value is not stale; it is replaced.
func stale(have entries, want ...entries) entries {
	neigh, fdb, routes := map[netip.Addr]bool{}, map[string]bool{}, map[netip.Prefix]bool{}
	for _, w := range want {
		for _, n := range w.Neighbours {
			neigh[n.IP] = true
		}
		for _, f := range w.FDB {
			fdb[f.MAC] = true
		}
		for _, r := range w.Routes {
			routes[r.Dst] = true
		}
	}
	var out entries
	for _, n := range have.Neighbours {
		if !neigh[n.IP] {
			out.Neighbours = append(out.Neighbours, n)
		}
	}
	for _, f := range have.FDB {
		if !fdb[f.MAC] {
			out.FDB = append(out.FDB, f)
		}
	}
	for _, r := range have.Routes {
		if !routes[r.Dst] {
			out.Routes = append(out.Routes, r)
		}
	}
	return out
}

// missing returns the entries of want that have lacks or holds with another value:
// those must be set.
func missing(have, want entries) entries {
	var out entries
	for _, n := range want.Neighbours {
		if !slices.Contains(have.Neighbours, n) {
			out.Neighbours = append(out.Neighbours, n)
		}
	}
	for _, f := range want.FDB {
		if !slices.Contains(have.FDB, f) {
			out.FDB = append(out.FDB, f)
		}
	}
	for _, r := range want.Routes {
		if !slices.Contains(have.Routes, r) {
			out.Routes = append(out.Routes, r)
		}
	}
	return out
}

// planner computes the entries the agent wants for remote nodes.
type planner struct {
	mode     string
	device   string // the VXLAN device
	underlay string
	cluster  netip.Prefix
	self     string
	// own is the own node's pod subnet, if known: a remote subnet overlapping it
	// would take the node's own pods' route away.
	own netip.Prefix
}

// forNode returns the entries for remote node n, or an error saying why it gets
// none (errIncomplete when it is still coming up). n nil (deleted) or the own node
// get none, without an error.
func (p planner) forNode(n *corev1.Node) (entries, error) {
	if n == nil || n.Name == p.self {
		return entries{}, nil
	}
	if n.Spec.PodCIDR == "" {
		return entries{}, fmt.Errorf("%w: no spec.podCIDR", errIncomplete)
	}
	subnet, err := p.podSubnet(n.Spec.PodCIDR)
	if err != nil {
		return entries{}, err
	}
	if p.own.IsValid() && p.own.Overlaps(subnet) {
		return entries{}, fmt.Errorf("podCIDR %s overlaps this node's %s", subnet, p.own)
	}
	ipText, ok := n.Annotations[AnnotationNodeIP]
	if !ok {
		return entries{}, fmt.Errorf("%w: no %s annotation", errIncomplete, AnnotationNodeIP)
	}
	nodeIP, err := netip.ParseAddr(ipText)
	if err != nil || !nodeIP.Is4() || nodeIP.IsUnspecified() || nodeIP.IsMulticast() || nodeIP.IsLoopback() {
		return entries{}, fmt.Errorf("annotation %s=%q is not a unicast IPv4 address", AnnotationNodeIP, ipText)
	}
	if p.mode == ModeDirect {
		return entries{Routes: []route{{Dst: subnet, Via: nodeIP, Dev: p.underlay}}}, nil
	}
	macText, ok := n.Annotations[AnnotationVTEPMAC]
	if !ok {
		return entries{}, fmt.Errorf("%w: no %s annotation", errIncomplete, AnnotationVTEPMAC)
	}
	mac, err := parseVTEPMAC(macText)
	if err != nil {
		return entries{}, fmt.Errorf("annotation %s=%q: %w", AnnotationVTEPMAC, macText, err)
	}
	gw := subnet.Addr()
	return entries{
		Neighbours: []neighbour{{IP: gw, MAC: mac}},
		FDB:        []fdbEntry{{MAC: mac, Dst: nodeIP}},
		Routes:     []route{{Dst: subnet, Via: gw, Dev: p.device}},
	}, nil
}

// podSubnet parses a node's podCIDR and checks it lies inside the cluster CIDR.
func (p planner) podSubnet(s string) (netip.Prefix, error) {
	subnet, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("podCIDR %q: %w", s, err)
	}
	subnet = subnet.Masked()
	if !subnet.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("podCIDR %q is not IPv4", s)
	}
	if !insideCluster(p.cluster, subnet) {
		return netip.Prefix{}, fmt.Errorf("podCIDR %s is outside the cluster CIDR %s", subnet, p.cluster)
	}
	return subnet, nil
}

// insideCluster says whether subnet lies in cluster.
func insideCluster(cluster, subnet netip.Prefix) bool {
	return subnet.Bits() >= cluster.Bits() && cluster.Contains(subnet.Addr())
}

// parseVTEPMAC parses a VTEP MAC address and returns it in canonical form.
func parseVTEPMAC(s string) (string, error) {
	mac, err := net.ParseMAC(s)
	if err != nil {
		return "", err
	}
	if len(mac) != 6 {
		return "", errors.New("not a 48-bit MAC address")
	}
	if mac[0]&1 != 0 {
		return "", errors.New("not a unicast MAC address")
	}
	if slices.Equal(mac, make(net.HardwareAddr, 6)) {
		return "", errors.New("the zero MAC address")
	}
	return mac.String(), nil
}
