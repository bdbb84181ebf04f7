package overlay

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubelab/kubelab/internal/testutil"
)

// The test network: a "vpc" namespace with bridge br0 (172.31.0.2/16); per node a
// namespace with eth0 on br0 (172.31.<n>.10/16, its VPC-side veth vpc<n>), a pod
// bridge cni0 (10.244.<n>.1/24) and a pod namespace with eth0 10.244.<n>.2/24 on it,
// routed through the node (ip_forward=1, bridge-nf-call-iptables=1).

type testNode struct {
	name    string
	netns   ns.NetNS
	pod     ns.NetNS
	h       *netlink.Handle // in netns
	ip      netip.Addr      // on eth0
	podCIDR netip.Prefix
	podIP   netip.Addr
	vpcPort string // its veth in the vpc namespace
}

type testNet struct {
	vpc   ns.NetNS
	vpcIP netip.Addr
	nodes []*testNode
}

func must(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func linkUp(t testing.TB, h *netlink.Handle, name string) netlink.Link {
	t.Helper()
	l, err := h.LinkByName(name)
	must(t, "look up "+name, err)
	must(t, "set "+name+" up", h.LinkSetUp(l))
	return l
}

func addAddr(t testing.TB, h *netlink.Handle, l netlink.Link, cidr string) {
	t.Helper()
	a, err := netlink.ParseAddr(cidr)
	must(t, "parse "+cidr, err)
	must(t, "add "+cidr+" to "+l.Attrs().Name, h.AddrAdd(l, a))
}

func addBridge(t testing.TB, h *netlink.Handle, name string) netlink.Link {
	t.Helper()
	la := netlink.NewLinkAttrs()
	la.Name = name
	must(t, "add bridge "+name, h.LinkAdd(&netlink.Bridge{LinkAttrs: la}))
	return linkUp(t, h, name)
}

// addVeth makes veth name in h's namespace with its peer in the namespace peerNS.
func addVeth(t testing.TB, h *netlink.Handle, name, peer string, peerNS ns.NetNS) {
	t.Helper()
	la := netlink.NewLinkAttrs()
	la.Name = name
	must(t, "add veth "+name, h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: peer,
		PeerNamespace: netlink.NsFd(int(peerNS.Fd()))}))
}

func sysctl(t testing.TB, n ns.NetNS, key, value string) {
	t.Helper()
	must(t, "sysctl "+key, n.Do(func(ns.NetNS) error {
		return os.WriteFile("/proc/sys/"+strings.ReplaceAll(key, ".", "/"), []byte(value), 0o644)
	}))
}

func newTestNet(t testing.TB, count int) *testNet {
	t.Helper()
	testutil.RequireRoot(t, "nft")
	tn := &testNet{vpc: testutil.NetNS(t), vpcIP: netip.MustParseAddr("172.31.0.2")}
	vh := testutil.NetlinkHandle(t, tn.vpc)
	linkUp(t, vh, "lo")
	br := addBridge(t, vh, "br0")
	addAddr(t, vh, br, "172.31.0.2/16")
	for i := 1; i <= count; i++ {
		n := &testNode{
			name:    fmt.Sprintf("node-%c", 'a'+i-1),
			netns:   testutil.NetNS(t),
			pod:     testutil.NetNS(t),
			ip:      netip.MustParseAddr(fmt.Sprintf("172.31.%d.10", i)),
			podCIDR: netip.MustParsePrefix(fmt.Sprintf("10.244.%d.0/24", i)),
			podIP:   netip.MustParseAddr(fmt.Sprintf("10.244.%d.2", i)),
			vpcPort: fmt.Sprintf("vpc%d", i),
		}
		n.h = testutil.NetlinkHandle(t, n.netns)
		ph := testutil.NetlinkHandle(t, n.pod)
		linkUp(t, n.h, "lo")
		linkUp(t, ph, "lo")
		sysctl(t, n.netns, "net.ipv4.ip_forward", "1")
		if _, err := os.Stat("/proc/sys/net/bridge/bridge-nf-call-iptables"); err == nil {
			// As on a real node: bridged IPv4 goes through the ip family's hooks.
			sysctl(t, n.netns, "net.bridge.bridge-nf-call-iptables", "1")
		}

		addVeth(t, n.h, "eth0", n.vpcPort, tn.vpc)
		addAddr(t, n.h, linkUp(t, n.h, "eth0"), n.ip.String()+"/16")
		port := linkUp(t, vh, n.vpcPort)
		must(t, "enslave "+n.vpcPort, vh.LinkSetMaster(port, br))

		cni0 := addBridge(t, n.h, "cni0")
		addAddr(t, n.h, cni0, fmt.Sprintf("10.244.%d.1/24", i))
		addVeth(t, n.h, "veth0", "eth0", n.pod)
		must(t, "enslave veth0", n.h.LinkSetMaster(linkUp(t, n.h, "veth0"), cni0))
		addAddr(t, ph, linkUp(t, ph, "eth0"), n.podIP.String()+"/24")
		must(t, "pod default route", ph.RouteAdd(&netlink.Route{Gw: net.ParseIP(fmt.Sprintf("10.244.%d.1", i))}))
		tn.nodes = append(tn.nodes, n)
	}
	return tn
}

// nodeObject is the Node of n as the API holds it before any agent ran.
func (n *testNode) nodeObject() *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.name},
		Spec:       corev1.NodeSpec{PodCIDR: n.podCIDR.String(), PodCIDRs: []string{n.podCIDR.String()}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: n.ip.String()},
			{Type: corev1.NodeHostName, Address: n.name},
		}},
	}
}

// startAgent runs an agent until the returned stop (also run at cleanup) is called.
func startAgent(t testing.TB, cfg Config, client kubernetes.Interface) (stop func()) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	a, err := New(cfg, client)
	must(t, "new agent", err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent %s: %v", cfg.NodeName, err)
		}
	})
	t.Cleanup(stop)
	return stop
}

// Reading the kernel's state directly, independently of the agent's own listing.

func findRoute(h *netlink.Handle, dst netip.Prefix) (*netlink.Route, error) {
	rs, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_MAIN, Dst: prefixNet(dst)},
		netlink.RT_FILTER_TABLE|netlink.RT_FILTER_DST)
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, nil
	}
	return &rs[0], nil
}

func findNeigh(h *netlink.Handle, dev string, family int, match func(netlink.Neigh) bool) (*netlink.Neigh, error) {
	l, err := h.LinkByName(dev)
	if err != nil {
		return nil, err
	}
	ns, err := h.NeighList(l.Attrs().Index, family)
	if err != nil {
		return nil, err
	}
	for _, n := range ns {
		if match(n) {
			return &n, nil
		}
	}
	return nil, nil
}

// checkVXLANEntries checks that h has the vxlan-mode entries for a remote node.
func checkVXLANEntries(h *netlink.Handle, dev string, subnet netip.Prefix, mac string, nodeIP netip.Addr) error {
	gw := subnet.Addr()
	n, err := findNeigh(h, dev, netlink.FAMILY_V4, func(n netlink.Neigh) bool { return n.IP.Equal(gw.AsSlice()) })
	if err != nil || n == nil {
		return fmt.Errorf("no neighbour %s on %s (%v)", gw, dev, err)
	}
	if n.HardwareAddr.String() != mac || n.State&netlink.NUD_PERMANENT == 0 {
		return fmt.Errorf("neighbour %s is %s state %#x, want %s permanent", gw, n.HardwareAddr, n.State, mac)
	}
	f, err := findNeigh(h, dev, unix.AF_BRIDGE, func(n netlink.Neigh) bool { return n.HardwareAddr.String() == mac })
	if err != nil || f == nil {
		return fmt.Errorf("no fdb entry %s on %s (%v)", mac, dev, err)
	}
	if !f.IP.Equal(nodeIP.AsSlice()) || f.State&netlink.NUD_PERMANENT == 0 {
		return fmt.Errorf("fdb entry %s has dst %s state %#x, want %s permanent", mac, f.IP, f.State, nodeIP)
	}
	r, err := findRoute(h, subnet)
	if err != nil || r == nil {
		return fmt.Errorf("no route to %s (%v)", subnet, err)
	}
	l, err := h.LinkByName(dev)
	if err != nil {
		return err
	}
	if r.LinkIndex != l.Attrs().Index || !r.Gw.Equal(gw.AsSlice()) || r.Flags&int(netlink.FLAG_ONLINK) == 0 || r.Protocol != routeProtocol {
		return fmt.Errorf("route %s is via %s ifindex %d flags %#x proto %d, want via %s dev %s onlink proto %d",
			subnet, r.Gw, r.LinkIndex, r.Flags, r.Protocol, gw, dev, routeProtocol)
	}
	return nil
}

// checkNoEntries checks that h has no neighbour, FDB entry or route left for a
// remote subnet and MAC.
func checkNoEntries(h *netlink.Handle, dev string, subnet netip.Prefix, mac string) error {
	gw := subnet.Addr()
	if n, err := findNeigh(h, dev, netlink.FAMILY_V4, func(n netlink.Neigh) bool { return n.IP.Equal(gw.AsSlice()) }); err != nil || n != nil {
		return fmt.Errorf("neighbour %s still on %s (%v)", gw, dev, err)
	}
	if mac != "" {
		if f, err := findNeigh(h, dev, unix.AF_BRIDGE, func(n netlink.Neigh) bool { return n.HardwareAddr.String() == mac }); err != nil || f != nil {
			return fmt.Errorf("fdb entry %s still on %s (%v)", mac, dev, err)
		}
	}
	if r, err := findRoute(h, subnet); err != nil || r != nil {
		return fmt.Errorf("route to %s still there (%v)", subnet, err)
	}
	return nil
}

// listenIn listens on TCP addr inside namespace n.
func listenIn(t testing.TB, n ns.NetNS, addr string) net.Listener {
	t.Helper()
	var l net.Listener
	must(t, "listen on "+addr, n.Do(func(ns.NetNS) error {
		var err error
		l, err = net.Listen("tcp4", addr)
		return err
	}))
	t.Cleanup(func() { l.Close() })
	return l
}

// dialIn dials TCP addr from inside namespace n.
func dialIn(n ns.NetNS, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.Do(func(ns.NetNS) error {
		var err error
		c, err = net.DialTimeout("tcp4", addr, 2*time.Second)
		return err
	})
	return c, err
}

// echoOnce accepts one connection on l, echoes one line and reports the client's
// address.
func echoOnce(l net.Listener) <-chan string {
	from := make(chan string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			from <- "accept: " + err.Error()
			return
		}
		defer c.Close()
		from <- c.RemoteAddr().(*net.TCPAddr).IP.String()
		buf := make([]byte, 64)
		n, _ := c.Read(buf)
		c.Write(buf[:n])
	}()
	return from
}

// exchange sends a line from namespace n to addr and reads it back.
func exchange(n ns.NetNS, addr string) error {
	c, err := dialIn(n, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	buf := make([]byte, 5)
	if _, err := c.Read(buf); err != nil {
		return err
	}
	if string(buf) != "ping\n" {
		return fmt.Errorf("echo %q, want %q", buf, "ping\n")
	}
	return nil
}

// nftTables lists the nftables tables of namespace n.
func nftTables(t testing.TB, n ns.NetNS) string {
	t.Helper()
	var out []byte
	must(t, "nft list tables", n.Do(func(ns.NetNS) error {
		var err error
		out, err = exec.Command("nft", "list", "tables").CombinedOutput()
		return err
	}))
	return string(out)
}
