package vpc

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kubelab/kubelab/internal/util/netns"
)

// Interface is an elastic network interface attached to an instance, as the cloud has it.
type Interface struct {
	// ID is the interface's id (eni-…); the links the fabric makes for it carry it as
	// their alias.
	ID string
	// DeviceIndex is its attachment's device index: 0 is the node's eth0, N the link ethN.
	DeviceIndex int
	// MAC is its MAC address.
	MAC string
	// IPs are its private addresses, the primary one first.
	IPs []string
}

// Fabric is what AWS's VPC does for network interfaces, made of the cluster's
// namespaces: each interface attached to a node's instance at a device index N ≥ 1 is the
// link ethN of the node's namespace (the interface's MAC, its primary address as a /16
// without a route of its own, loose reverse-path filtering), a veth whose other end is a
// port of vpc0; and every private address of an attached interface but a primary
// interface's primary one (the node's own address, which the node answers ARP for) is
// delivered to the interface, whoever sends to it: each node's eth0 and the VPC's vpc0
// have a permanent neighbour entry, marked extern_learn, that maps the address to the
// interface's MAC, so that frames for it reach that node even though no interface of the
// node has the address (the node routes it on, to a pod's veth). The VPC's router forwards
// within the VPC (IPv4 forwarding on, no redirects, a blackhole default route so that
// nothing leaves), for nodes that route pods' traffic through it.
//
// The cloud tells the fabric its state (Sync at start, SetInstance on every change); the
// cluster tells it which node runs which instance (Node.InstanceID in EnsureNode).
// Each change converges every namespace of the cluster: the links whose alias is an
// interface id and the extern_learn entries are the fabric's own, and it adds, changes
// and removes only those, so a start after a kill -9 finds what the last run left and
// corrects it.
type Fabric struct {
	v *VPC

	mu      sync.Mutex
	synced  bool
	desired map[string][]Interface // by instance id
	nodes   map[string]string      // instance id → node name
}

// Fabric is the VPC's fabric.
func (v *VPC) Fabric() *Fabric { return v.fabric }

// Sync gives the fabric every instance's interfaces (the cloud's state at its start) and
// converges.
func (f *Fabric) Sync(all map[string][]Interface) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.desired = map[string][]Interface{}
	for id, ifaces := range all {
		if len(ifaces) > 0 {
			f.desired[id] = ifaces
		}
	}
	f.synced = true
	f.convergeLocked()
}

// SetInstance sets one instance's interfaces (none: it has no more) and converges.
func (f *Fabric) SetInstance(instanceID string, ifaces []Interface) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(ifaces) == 0 {
		delete(f.desired, instanceID)
	} else {
		f.desired[instanceID] = ifaces
	}
	f.convergeLocked()
}

// bind records that node runs instanceID and converges; it fails if the node's own
// namespace could not be converged.
func (f *Fabric) bind(instanceID, node string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes[instanceID] = node
	return f.convergeLocked()[node]
}

// unbind forgets node.
func (f *Fabric) unbind(node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, n := range f.nodes {
		if n == node {
			delete(f.nodes, id)
		}
	}
}

// convergeLocked makes every namespace of the cluster what the desired state says; it
// does nothing before the cloud's first Sync. Errors are logged and returned by
// namespace ("" the VPC's, else the node's name); the next change tries again.
func (f *Fabric) convergeLocked() map[string]error {
	if !f.synced {
		return nil
	}
	want := desiredState(f.desired, f.nodes)
	errs := map[string]error{}
	if err := f.v.converge(f.v.Path(), Bridge, want[""], false); err != nil {
		errs[""] = fmt.Errorf("vpc fabric: %s: %w", f.v.Name(), err)
	}
	for _, node := range sortedValues(f.nodes) {
		path := f.v.NodePath(node)
		if !NamespaceExists(path) {
			continue
		}
		if err := f.v.converge(path, NodeInterface, want[node], true); err != nil {
			errs[node] = fmt.Errorf("vpc fabric: node %s: %w", node, err)
		}
	}
	for _, err := range errs {
		f.v.cfg.Logger.Error("vpc fabric did not converge", "err", err)
	}
	return errs
}

func sortedValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// eniLink is a link the fabric makes in a node's namespace for an interface.
type eniLink struct {
	Name, ENI, MAC, IP string
}

// nsState is the fabric's part of one namespace: its interface links (by name) and its
// neighbour entries on the namespace's VPC interface (address → MAC).
type nsState struct {
	Links map[string]eniLink
	Neigh map[string]string
}

// desiredState is what each namespace should have: "" is the VPC's namespace, any
// other key a node's. Every node and the VPC map every delivered address of every
// instance to its interface's MAC, except a node its own instance's addresses; a node
// has a link for each of its instance's interfaces at device index 1 and up.
func desiredState(desired map[string][]Interface, nodes map[string]string) map[string]nsState {
	neigh := map[string]string{}
	owner := map[string]string{} // address → instance
	for _, id := range sortedKeys(desired) {
		for _, ifc := range desired[id] {
			for k, ip := range ifc.IPs {
				if ifc.DeviceIndex == 0 && k == 0 {
					continue
				}
				neigh[ip], owner[ip] = strings.ToLower(ifc.MAC), id
			}
		}
	}
	out := map[string]nsState{"": {Links: map[string]eniLink{}, Neigh: neigh}}
	for id, node := range nodes {
		st := nsState{Links: map[string]eniLink{}, Neigh: map[string]string{}}
		for ip, mac := range neigh {
			if owner[ip] != id {
				st.Neigh[ip] = mac
			}
		}
		for _, ifc := range desired[id] {
			if ifc.DeviceIndex < 1 || len(ifc.IPs) == 0 {
				continue
			}
			name := "eth" + strconv.Itoa(ifc.DeviceIndex)
			st.Links[name] = eniLink{Name: name, ENI: ifc.ID, MAC: strings.ToLower(ifc.MAC), IP: ifc.IPs[0]}
		}
		out[node] = st
	}
	return out
}

func sortedKeys[T any](m map[string]T) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// step is one change the fabric makes in a namespace.
type step struct {
	Op   string // "del-link", "add-link", "del-neigh", "set-neigh"
	Link eniLink
	IP   string
	MAC  string
}

func (s step) String() string {
	switch s.Op {
	case "del-link", "add-link":
		return fmt.Sprintf("%s %s %s %s %s", s.Op, s.Link.Name, s.Link.ENI, s.Link.MAC, s.Link.IP)
	}
	return fmt.Sprintf("%s %s %s", s.Op, s.IP, s.MAC)
}

// plan lists the steps that make actual into desired: links that differ are removed
// before they are made again, links go before neighbour entries; each kind in name or
// address order.
func plan(desired, actual nsState) []step {
	var out []step
	for _, name := range sortedKeys(actual.Links) {
		if d, ok := desired.Links[name]; !ok || d != actual.Links[name] {
			out = append(out, step{Op: "del-link", Link: actual.Links[name]})
		}
	}
	for _, name := range sortedKeys(desired.Links) {
		if a, ok := actual.Links[name]; !ok || a != desired.Links[name] {
			out = append(out, step{Op: "add-link", Link: desired.Links[name]})
		}
	}
	for _, ip := range sortedKeys(actual.Neigh) {
		if _, ok := desired.Neigh[ip]; !ok {
			out = append(out, step{Op: "del-neigh", IP: ip, MAC: actual.Neigh[ip]})
		}
	}
	for _, ip := range sortedKeys(desired.Neigh) {
		if actual.Neigh[ip] != desired.Neigh[ip] {
			out = append(out, step{Op: "set-neigh", IP: ip, MAC: desired.Neigh[ip]})
		}
	}
	return out
}

// converge reads the fabric's part of the namespace at path (its VPC interface is dev),
// plans and applies the steps. Links are made only in nodes' namespaces.
func (v *VPC) converge(path, dev string, want nsState, node bool) error {
	if want.Links == nil {
		want = nsState{Links: map[string]eniLink{}, Neigh: map[string]string{}}
	}
	if !node {
		if err := configureRouter(path); err != nil {
			return err
		}
	}
	return withHandle(path, func(h *netlink.Handle) error {
		vif, err := h.LinkByName(dev)
		if err != nil {
			return fmt.Errorf("link %s: %w", dev, err)
		}
		actual, addrs, err := readState(h, vif, node)
		if err != nil {
			return err
		}
		// A link that has its address keeps it, whatever else was added to it.
		for name, a := range actual.Links {
			if d, ok := want.Links[name]; ok && slices.Contains(addrs[name], d.IP) {
				a.IP = d.IP
				actual.Links[name] = a
			}
		}
		var errs []error
		for _, s := range plan(want, actual) {
			if err := v.apply(h, path, vif, s); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", s, err))
			}
		}
		return errors.Join(errs...)
	})
}

// readState reads the fabric's links in a node's namespace (veths with an interface id
// as alias) with their addresses, and its neighbour entries (permanent, extern_learn,
// IPv4, on vif) of any namespace.
func readState(h *netlink.Handle, vif netlink.Link, node bool) (nsState, map[string][]string, error) {
	st := nsState{Links: map[string]eniLink{}, Neigh: map[string]string{}}
	addrs := map[string][]string{}
	links, err := h.LinkList()
	if err != nil {
		return st, nil, fmt.Errorf("list links: %w", err)
	}
	for _, l := range links {
		a := l.Attrs()
		if !node || !strings.HasPrefix(a.Alias, "eni-") || l.Type() != "veth" {
			continue
		}
		st.Links[a.Name] = eniLink{Name: a.Name, ENI: a.Alias, MAC: a.HardwareAddr.String()}
		list, err := h.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			return st, nil, fmt.Errorf("addresses of %s: %w", a.Name, err)
		}
		for _, ad := range list {
			addrs[a.Name] = append(addrs[a.Name], ad.IP.String())
		}
	}
	neighs, err := h.NeighList(vif.Attrs().Index, netlink.FAMILY_V4)
	if err != nil {
		return st, nil, fmt.Errorf("list neighbours of %s: %w", vif.Attrs().Name, err)
	}
	for _, n := range neighs {
		if n.Flags&netlink.NTF_EXT_LEARNED != 0 && n.State&netlink.NUD_PERMANENT != 0 {
			st.Neigh[n.IP.String()] = n.HardwareAddr.String()
		}
	}
	return st, addrs, nil
}

// apply makes one step in the namespace at path.
func (v *VPC) apply(h *netlink.Handle, path string, vif netlink.Link, s step) error {
	switch s.Op {
	case "del-link":
		l, err := h.LinkByName(s.Link.Name)
		if err != nil {
			return nil
		}
		return h.LinkDel(l)
	case "add-link":
		return v.addENILink(h, path, s.Link)
	case "del-neigh":
		err := h.NeighDel(&netlink.Neigh{LinkIndex: vif.Attrs().Index, Family: netlink.FAMILY_V4, IP: net.ParseIP(s.IP)})
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	case "set-neigh":
		mac, err := net.ParseMAC(s.MAC)
		if err != nil {
			return err
		}
		return h.NeighSet(&netlink.Neigh{LinkIndex: vif.Attrs().Index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
			Flags: netlink.NTF_EXT_LEARNED, IP: net.ParseIP(s.IP), HardwareAddr: mac})
	}
	return fmt.Errorf("unknown step %q", s.Op)
}

// addENILink makes the link l in the node's namespace at path (nh is a handle on it): a
// veth whose other end is a port of vpc0.
func (v *VPC) addENILink(nh *netlink.Handle, path string, l eniLink) error {
	mac, err := net.ParseMAC(l.MAC)
	if err != nil {
		return err
	}
	if _, err := nh.LinkByName(l.Name); err == nil {
		return fmt.Errorf("a link %s that the fabric did not make is in the way", l.Name)
	}
	port := eniPortName(path, l.ENI)
	err = withHandle(v.Path(), func(vh *netlink.Handle) error {
		br, err := vh.LinkByName(Bridge)
		if err != nil {
			return fmt.Errorf("bridge %s: %w", Bridge, err)
		}
		if old, err := vh.LinkByName(port); err == nil && old.Attrs().Alias == l.ENI { // its node end is gone
			_ = vh.LinkDel(old)
		}
		nsFile, err := os.Open(path)
		if err != nil {
			return err
		}
		defer nsFile.Close()
		attrs := netlink.NewLinkAttrs()
		attrs.Name = port
		attrs.MasterIndex = br.Attrs().Index
		if err := vh.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: l.Name, PeerHardwareAddr: mac,
			PeerNamespace: netlink.NsFd(int(nsFile.Fd()))}); err != nil {
			return fmt.Errorf("add veth %s/%s: %w", port, l.Name, err)
		}
		pl, err := vh.LinkByName(port)
		if err != nil {
			return err
		}
		if err := vh.LinkSetAlias(pl, l.ENI); err != nil {
			return err
		}
		return vh.LinkSetUp(pl)
	})
	if err != nil {
		return err
	}
	eth, err := nh.LinkByName(l.Name)
	if err != nil {
		return err
	}
	if err := nh.LinkSetAlias(eth, l.ENI); err != nil {
		return fmt.Errorf("alias %s: %w", l.Name, err)
	}
	addr, err := netlink.ParseAddr(l.IP + "/16")
	if err != nil {
		return err
	}
	// No route of its own: the node's on-link route to the VPC stays on eth0; who
	// routes through ethN says so (policy routing).
	addr.Flags = unix.IFA_F_NOPREFIXROUTE
	if err := nh.AddrAdd(eth, addr); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add %s to %s: %w", addr, l.Name, err)
	}
	if err := netns.Do(path, func() error {
		// Loose: what arrives on ethN for an address of it comes from senders the node
		// reaches through eth0.
		return os.WriteFile(filepath.Join("/proc/sys/net/ipv4/conf", l.Name, "rp_filter"), []byte("2"), 0o644)
	}); err != nil {
		return fmt.Errorf("sysctl rp_filter of %s: %w", l.Name, err)
	}
	return nh.LinkSetUp(eth)
}

// eniPortName is the VPC end of an interface's link in the node's namespace at path.
func eniPortName(path, eni string) string {
	sum := sha256.Sum256([]byte(path + "/" + eni))
	return "ve" + hex.EncodeToString(sum[:])[:10]
}

// configureRouter lets the VPC's namespace forward within the VPC: IPv4 forwarding on,
// no ICMP redirects (the router is the way to an address no node answers ARP for), and a
// blackhole default route, so that a packet for outside the VPC is dropped as when the
// router forwarded nothing (the NAT gateway takes TCP before routing).
func configureRouter(path string) error {
	err := netns.Do(path, func() error {
		for _, kv := range [][2]string{
			{"net/ipv4/conf/all/send_redirects", "0"},
			{"net/ipv4/conf/default/send_redirects", "0"},
			{"net/ipv4/conf/" + Bridge + "/send_redirects", "0"},
			{"net/ipv4/ip_forward", "1"},
		} {
			if err := os.WriteFile(filepath.Join("/proc/sys", kv[0]), []byte(kv[1]), 0o644); err != nil {
				return fmt.Errorf("sysctl %s: %w", strings.ReplaceAll(kv[0], "/", "."), err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return withHandle(path, func(h *netlink.Handle) error {
		_, all, _ := net.ParseCIDR("0.0.0.0/0")
		if err := h.RouteReplace(&netlink.Route{Dst: all, Type: unix.RTN_BLACKHOLE}); err != nil {
			return fmt.Errorf("blackhole default route: %w", err)
		}
		return nil
	})
}
