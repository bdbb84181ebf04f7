package overlay

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubelab/kubelab/internal/overlay/overlaytest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// annotations waits until the agent of node has published its annotations and
// returns them.
func annotations(t *testing.T, client kubernetes.Interface, node string, mode string) map[string]string {
	t.Helper()
	var ann map[string]string
	testutil.EventuallyWithin(t, 10*time.Second, "annotations of "+node, func() error {
		n, err := client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ann = n.Annotations
		if ann[AnnotationNodeIP] == "" || (mode == ModeVXLAN && ann[AnnotationVTEPMAC] == "") {
			return fmt.Errorf("annotations %v", ann)
		}
		return nil
	})
	return ann
}

func TestVXLANPodToPod(t *testing.T) {
	tn := newTestNet(t, 2)
	a, b := tn.nodes[0], tn.nodes[1]
	client := fake.NewClientset(a.nodeObject(), b.nodeObject())
	for _, n := range tn.nodes {
		startAgent(t, Config{NodeName: n.name, NetNS: n.netns.Path()}, client)
	}
	annA, annB := annotations(t, client, a.name, ModeVXLAN), annotations(t, client, b.name, ModeVXLAN)
	if annA[AnnotationNodeIP] != a.ip.String() || annB[AnnotationNodeIP] != b.ip.String() {
		t.Fatalf("node-ip annotations %q, %q; want the underlay addresses %s, %s",
			annA[AnnotationNodeIP], annB[AnnotationNodeIP], a.ip, b.ip)
	}

	// The device as asked for, its MAC the published one.
	l, err := a.h.LinkByName(DefaultDevice)
	must(t, "vxlan device", err)
	vx, ok := l.(*netlink.Vxlan)
	if !ok {
		t.Fatalf("%s is a %s", DefaultDevice, l.Type())
	}
	if vx.VxlanId != 1 || vx.Port != 8472 || vx.Learning || !vx.SrcAddr.Equal(a.ip.AsSlice()) || vx.MTU != 1450 ||
		vx.HardwareAddr.String() != annA[AnnotationVTEPMAC] || vx.Flags&net.FlagUp == 0 {
		t.Errorf("device: vni %d port %d learning %v local %s mtu %d mac %s up %v; want vni 1 port 8472 no learning local %s mtu 1450 mac %s up",
			vx.VxlanId, vx.Port, vx.Learning, vx.SrcAddr, vx.MTU, vx.HardwareAddr, vx.Flags&net.FlagUp != 0, a.ip, annA[AnnotationVTEPMAC])
	}
	testutil.EventuallyWithin(t, 10*time.Second, "device address", func() error {
		addrs, err := a.h.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		if len(addrs) != 1 || addrs[0].IPNet.String() != "10.244.1.0/32" {
			return fmt.Errorf("addresses %v, want 10.244.1.0/32", addrs)
		}
		return nil
	})

	testutil.EventuallyWithin(t, 10*time.Second, "entries on node A for node B", func() error {
		return checkVXLANEntries(a.h, DefaultDevice, b.podCIDR, annB[AnnotationVTEPMAC], b.ip)
	})
	testutil.EventuallyWithin(t, 10*time.Second, "entries on node B for node A", func() error {
		return checkVXLANEntries(b.h, DefaultDevice, a.podCIDR, annA[AnnotationVTEPMAC], a.ip)
	})

	capture, err := overlaytest.Capture(tn.vpc.Path(), a.vpcPort)
	must(t, "capture", err)
	defer capture.Close()
	l4 := listenIn(t, b.pod, b.podIP.String()+":0")
	port := l4.Addr().(*net.TCPAddr).Port
	from := echoOnce(l4)
	must(t, "pod A to pod B", exchange(a.pod, l4.Addr().String()))
	if got := <-from; got != a.podIP.String() {
		t.Errorf("pod B saw the connection from %s, want pod A's own address %s", got, a.podIP)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, want := range []struct{ src, dst, innerSrc, innerDst netip.Addr }{
		{a.ip, b.ip, a.podIP, b.podIP},
		{b.ip, a.ip, b.podIP, a.podIP},
	} {
		p, err := capture.WaitFor(ctx, func(p overlaytest.Packet) bool {
			return p.Src == want.src && p.Dst == want.dst && p.Inner != nil &&
				p.Inner.Src == want.innerSrc && p.Inner.Dst == want.innerDst
		})
		if err != nil {
			t.Fatalf("no vxlan packet %s > %s carrying %s > %s: %v", want.src, want.dst, want.innerSrc, want.innerDst, err)
		}
		if p.Proto != overlaytest.ProtoUDP || p.DstPort != 8472 || !p.VXLAN || p.VNI != 1 || p.Inner.Proto != overlaytest.ProtoTCP {
			t.Errorf("packet %s: want UDP to 8472, VXLAN VNI 1, TCP inside", p)
		}
		if want.innerDst == b.podIP && p.Inner.DstPort != uint16(port) {
			t.Errorf("packet %s: inner destination port, want %d", p, port)
		}
	}
	for _, p := range capture.Packets() {
		if p.Proto == overlaytest.ProtoTCP && (p.Src == a.podIP || p.Dst == a.podIP) {
			t.Errorf("pod traffic on the VPC without encapsulation: %s", p)
		}
	}

	// Node B leaves the cluster: its entries go from node A.
	must(t, "delete node B", client.CoreV1().Nodes().Delete(context.Background(), b.name, metav1.DeleteOptions{}))
	testutil.EventuallyWithin(t, 10*time.Second, "node B's entries gone from node A", func() error {
		return checkNoEntries(a.h, DefaultDevice, b.podCIDR, annB[AnnotationVTEPMAC])
	})
}

// remoteNode is a Node as a remote agent would have annotated it.
func remoteNode(name, podCIDR, mac, ip string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}},
		Spec: corev1.NodeSpec{PodCIDR: podCIDR}}
	if mac != "" {
		n.Annotations[AnnotationVTEPMAC] = mac
	}
	if ip != "" {
		n.Annotations[AnnotationNodeIP] = ip
	}
	return n
}

func updateNode(t *testing.T, client kubernetes.Interface, name string, change func(*corev1.Node)) {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	must(t, "get "+name, err)
	change(n)
	_, err = client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
	must(t, "update "+name, err)
}

func TestRemoteNodeChanges(t *testing.T) {
	tn := newTestNet(t, 1)
	a := tn.nodes[0]
	const macB, macB2 = "02:00:00:00:00:0b", "02:00:00:00:00:bb"
	subnetB, subnetB3 := netip.MustParsePrefix("10.244.2.0/24"), netip.MustParsePrefix("10.244.3.0/24")
	client := fake.NewClientset(a.nodeObject(), remoteNode("node-b", subnetB.String(), macB, "172.31.2.10"),
		remoteNode("node-c", "10.244.4.0/24", "zz", "172.31.4.10"),                // a MAC that is none
		remoteNode("node-d", "10.99.0.0/24", "02:00:00:00:00:0d", "172.31.5.10"),  // outside the cluster CIDR
		remoteNode("node-e", "10.244.1.0/24", "02:00:00:00:00:0e", "172.31.6.10"), // node A's subnet
		remoteNode("node-f", "10.244.6.0/24", "", ""))                             // no agent yet
	startAgent(t, Config{NodeName: a.name, NetNS: a.netns.Path(), ResyncPeriod: 100 * time.Millisecond}, client)

	testutil.EventuallyWithin(t, 10*time.Second, "entries for node B", func() error {
		return checkVXLANEntries(a.h, DefaultDevice, subnetB, macB, netip.MustParseAddr("172.31.2.10"))
	})
	for _, s := range []string{"10.244.4.0/24", "10.99.0.0/24", "10.244.6.0/24"} {
		if r, err := findRoute(a.h, netip.MustParsePrefix(s)); err != nil || r != nil {
			t.Errorf("route to %s of a node that must get none: %v (%v)", s, r, err)
		}
	}
	if r, err := findRoute(a.h, a.podCIDR); err != nil || r == nil || r.Protocol == routeProtocol {
		t.Errorf("own subnet's route taken over by node-e's claim: %+v (%v)", r, err)
	}

	t.Run("annotations changed", func(t *testing.T) {
		updateNode(t, client, "node-b", func(n *corev1.Node) {
			n.Annotations[AnnotationVTEPMAC] = macB2
			n.Annotations[AnnotationNodeIP] = "172.31.2.20"
		})
		testutil.EventuallyWithin(t, 10*time.Second, "entries follow", func() error {
			if err := checkVXLANEntries(a.h, DefaultDevice, subnetB, macB2, netip.MustParseAddr("172.31.2.20")); err != nil {
				return err
			}
			if f, _ := findNeigh(a.h, DefaultDevice, unix.AF_BRIDGE, func(n netlink.Neigh) bool { return n.HardwareAddr.String() == macB }); f != nil {
				return fmt.Errorf("old fdb entry %s still there", macB)
			}
			return nil
		})
	})
	t.Run("podCIDR changed", func(t *testing.T) {
		updateNode(t, client, "node-b", func(n *corev1.Node) { n.Spec.PodCIDR = subnetB3.String() })
		testutil.EventuallyWithin(t, 10*time.Second, "entries follow", func() error {
			if err := checkNoEntries(a.h, DefaultDevice, subnetB, ""); err != nil {
				return err
			}
			return checkVXLANEntries(a.h, DefaultDevice, subnetB3, macB2, netip.MustParseAddr("172.31.2.20"))
		})
	})
	t.Run("removed by hand", func(t *testing.T) {
		l, err := a.h.LinkByName(DefaultDevice)
		must(t, "device", err)
		r, err := findRoute(a.h, subnetB3)
		if err != nil || r == nil {
			t.Fatalf("route to %s: %v", subnetB3, err)
		}
		must(t, "delete route", a.h.RouteDel(r))
		mac, _ := net.ParseMAC(macB2)
		must(t, "delete fdb entry", a.h.NeighDel(&netlink.Neigh{LinkIndex: l.Attrs().Index, Family: unix.AF_BRIDGE, Flags: netlink.NTF_SELF,
			HardwareAddr: mac, IP: net.ParseIP("172.31.2.20")}))
		must(t, "delete neighbour", a.h.NeighDel(&netlink.Neigh{LinkIndex: l.Attrs().Index, Family: netlink.FAMILY_V4,
			IP: net.ParseIP("10.244.3.0")}))
		testutil.EventuallyWithin(t, 10*time.Second, "resync sets them again", func() error {
			return checkVXLANEntries(a.h, DefaultDevice, subnetB3, macB2, netip.MustParseAddr("172.31.2.20"))
		})
	})
	t.Run("node deleted", func(t *testing.T) {
		must(t, "delete node-b", client.CoreV1().Nodes().Delete(context.Background(), "node-b", metav1.DeleteOptions{}))
		testutil.EventuallyWithin(t, 10*time.Second, "entries gone", func() error { return checkNoEntries(a.h, DefaultDevice, subnetB3, macB2) })
	})
}

func TestRestart(t *testing.T) {
	tn := newTestNet(t, 1)
	a := tn.nodes[0]
	const macB = "02:00:00:00:00:0b"
	subnetB := netip.MustParsePrefix("10.244.2.0/24")
	client := fake.NewClientset(a.nodeObject(), remoteNode("node-b", subnetB.String(), macB, "172.31.2.10"))
	cfg := Config{NodeName: a.name, NetNS: a.netns.Path()}
	stop := startAgent(t, cfg, client)
	testutil.EventuallyWithin(t, 10*time.Second, "entries for node B", func() error {
		return checkVXLANEntries(a.h, DefaultDevice, subnetB, macB, netip.MustParseAddr("172.31.2.10"))
	})
	dev, err := a.h.LinkByName(DefaultDevice)
	must(t, "device", err)
	stop()

	// While the agent is down: node B leaves, a crash leaves entries of a node the
	// API never had on the device, and others make routes and neighbours of their own.
	must(t, "delete node-b", client.CoreV1().Nodes().Delete(context.Background(), "node-b", metav1.DeleteOptions{}))
	idx := dev.Attrs().Index
	subnetZ := netip.MustParsePrefix("10.244.9.0/24")
	macZ, _ := net.ParseMAC("02:00:00:00:00:99")
	must(t, "plant fdb", a.h.NeighSet(&netlink.Neigh{LinkIndex: idx, Family: unix.AF_BRIDGE, Flags: netlink.NTF_SELF,
		State: netlink.NUD_PERMANENT, HardwareAddr: macZ, IP: net.ParseIP("172.31.9.10")}))
	must(t, "plant neighbour", a.h.NeighSet(&netlink.Neigh{LinkIndex: idx, Family: netlink.FAMILY_V4,
		State: netlink.NUD_PERMANENT, HardwareAddr: macZ, IP: net.ParseIP("10.244.9.0")}))
	must(t, "plant route", a.h.RouteAdd(&netlink.Route{LinkIndex: idx, Dst: prefixNet(subnetZ), Gw: net.ParseIP("10.244.9.0"),
		Flags: int(netlink.FLAG_ONLINK), Protocol: routeProtocol}))
	cni0, err := a.h.LinkByName("cni0")
	must(t, "cni0", err)
	foreign := netip.MustParsePrefix("10.244.8.0/24") // someone else's, inside the cluster CIDR
	must(t, "foreign route", a.h.RouteAdd(&netlink.Route{LinkIndex: cni0.Attrs().Index, Dst: prefixNet(foreign),
		Gw: net.ParseIP("10.244.1.99"), Protocol: 4}))
	outside := netip.MustParsePrefix("192.168.7.0/24") // of the agent's protocol, outside the cluster CIDR
	must(t, "outside route", a.h.RouteAdd(&netlink.Route{LinkIndex: cni0.Attrs().Index, Dst: prefixNet(outside),
		Gw: net.ParseIP("10.244.1.99"), Protocol: routeProtocol}))
	must(t, "foreign neighbour", a.h.NeighSet(&netlink.Neigh{LinkIndex: cni0.Attrs().Index, Family: netlink.FAMILY_V4,
		State: netlink.NUD_PERMANENT, HardwareAddr: macZ, IP: net.ParseIP("10.244.1.77")}))

	startAgent(t, cfg, client)
	testutil.EventuallyWithin(t, 10*time.Second, "stale entries gone", func() error {
		if err := checkNoEntries(a.h, DefaultDevice, subnetB, macB); err != nil {
			return err
		}
		return checkNoEntries(a.h, DefaultDevice, subnetZ, macZ.String())
	})
	for _, p := range []netip.Prefix{foreign, outside} {
		if r, err := findRoute(a.h, p); err != nil || r == nil {
			t.Errorf("route to %s that is not the agent's was removed (%v)", p, err)
		}
	}
	if n, err := findNeigh(a.h, "cni0", netlink.FAMILY_V4, func(n netlink.Neigh) bool { return n.IP.Equal(net.ParseIP("10.244.1.77")) }); err != nil || n == nil {
		t.Errorf("neighbour on cni0 that is not the agent's was removed (%v)", err)
	}
	dev2, err := a.h.LinkByName(DefaultDevice)
	must(t, "device after restart", err)
	if dev2.Attrs().Index != idx || dev2.Attrs().HardwareAddr.String() != dev.Attrs().HardwareAddr.String() {
		t.Errorf("device after restart: ifindex %d mac %s; want the same device, ifindex %d mac %s",
			dev2.Attrs().Index, dev2.Attrs().HardwareAddr, idx, dev.Attrs().HardwareAddr)
	}
}

func TestDeviceMadeAgainWhenConfigDiffers(t *testing.T) {
	tn := newTestNet(t, 1)
	a := tn.nodes[0]
	client := fake.NewClientset(a.nodeObject())
	stop := startAgent(t, Config{NodeName: a.name, NetNS: a.netns.Path()}, client)
	mac := annotations(t, client, a.name, ModeVXLAN)[AnnotationVTEPMAC]
	dev, err := a.h.LinkByName(DefaultDevice)
	must(t, "device", err)
	stop()

	startAgent(t, Config{NodeName: a.name, NetNS: a.netns.Path(), VNI: 7}, client)
	testutil.EventuallyWithin(t, 10*time.Second, "device with vni 7", func() error {
		l, err := a.h.LinkByName(DefaultDevice)
		if err != nil {
			return err
		}
		if vx, ok := l.(*netlink.Vxlan); !ok || vx.VxlanId != 7 {
			return fmt.Errorf("device %+v, want vni 7", l)
		}
		if l.Attrs().Index == dev.Attrs().Index {
			return fmt.Errorf("device kept ifindex %d", l.Attrs().Index)
		}
		if l.Attrs().HardwareAddr.String() != mac {
			return fmt.Errorf("device made again with mac %s, want the published %s", l.Attrs().HardwareAddr, mac)
		}
		return nil
	})
}

func TestDirectMode(t *testing.T) {
	tn := newTestNet(t, 2)
	a, b := tn.nodes[0], tn.nodes[1]
	// A device of an earlier vxlan mode, which direct mode removes.
	la := netlink.NewLinkAttrs()
	la.Name = DefaultDevice
	must(t, "left-over vxlan", a.h.LinkAdd(&netlink.Vxlan{LinkAttrs: la, VxlanId: 1, Port: 8472}))

	client := fake.NewClientset(a.nodeObject(), b.nodeObject())
	for _, n := range tn.nodes {
		startAgent(t, Config{NodeName: n.name, NetNS: n.netns.Path(), Mode: ModeDirect}, client)
	}
	if ann := annotations(t, client, a.name, ModeDirect); ann[AnnotationVTEPMAC] != "" {
		t.Errorf("direct mode published %s=%s", AnnotationVTEPMAC, ann[AnnotationVTEPMAC])
	}
	for _, c := range []struct{ on, to *testNode }{{a, b}, {b, a}} {
		testutil.EventuallyWithin(t, 10*time.Second, "route on "+c.on.name, func() error {
			r, err := findRoute(c.on.h, c.to.podCIDR)
			if err != nil || r == nil {
				return fmt.Errorf("no route to %s (%v)", c.to.podCIDR, err)
			}
			eth0, _ := c.on.h.LinkByName("eth0")
			if !r.Gw.Equal(c.to.ip.AsSlice()) || r.LinkIndex != eth0.Attrs().Index || r.Protocol != routeProtocol {
				return fmt.Errorf("route %s via %s ifindex %d proto %d, want via %s dev eth0 proto %d",
					c.to.podCIDR, r.Gw, r.LinkIndex, r.Protocol, c.to.ip, routeProtocol)
			}
			return nil
		})
	}
	if _, err := a.h.LinkByName(DefaultDevice); err == nil {
		t.Errorf("direct mode left the vxlan device %s", DefaultDevice)
	}

	capture, err := overlaytest.Capture(tn.vpc.Path(), a.vpcPort)
	must(t, "capture", err)
	defer capture.Close()
	l4 := listenIn(t, b.pod, b.podIP.String()+":0")
	from := echoOnce(l4)
	must(t, "pod A to pod B", exchange(a.pod, l4.Addr().String()))
	if got := <-from; got != a.podIP.String() {
		t.Errorf("pod B saw the connection from %s, want %s", got, a.podIP)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := capture.WaitFor(ctx, func(p overlaytest.Packet) bool {
		return p.Src == a.podIP && p.Dst == b.podIP && p.Proto == overlaytest.ProtoTCP
	}); err != nil {
		t.Fatalf("no plain pod-to-pod TCP on the VPC: %v", err)
	}
	for _, p := range capture.Packets() {
		if p.VXLAN {
			t.Errorf("vxlan packet in direct mode: %s", p)
		}
	}

	must(t, "delete node B", client.CoreV1().Nodes().Delete(context.Background(), b.name, metav1.DeleteOptions{}))
	testutil.EventuallyWithin(t, 10*time.Second, "route gone", func() error {
		if r, err := findRoute(a.h, b.podCIDR); err != nil || r != nil {
			return fmt.Errorf("route to %s still there (%v)", b.podCIDR, err)
		}
		return nil
	})
}

func TestMasquerade(t *testing.T) {
	tn := newTestNet(t, 1)
	a := tn.nodes[0]
	client := fake.NewClientset(a.nodeObject())
	startAgent(t, Config{NodeName: a.name, NetNS: a.netns.Path()}, client)
	annotations(t, client, a.name, ModeVXLAN)
	if strings.Contains(nftTables(t, tn.vpc), TableName) {
		t.Fatal("table in the vpc namespace")
	}
	vh := testutil.NetlinkHandle(t, tn.vpc)
	if r, err := vh.RouteGet(net.ParseIP(a.podIP.String())); err == nil {
		t.Fatalf("the vpc namespace has a route to pods (%v); the test needs none", r)
	}

	l4 := listenIn(t, tn.vpc, tn.vpcIP.String()+":0")
	from := echoOnce(l4)
	must(t, "pod A to the VPC", exchange(a.pod, l4.Addr().String()))
	if got := <-from; got != a.ip.String() {
		t.Errorf("the VPC saw the connection from %s, want node A's address %s", got, a.ip)
	}
}

func TestCleanup(t *testing.T) {
	tn := newTestNet(t, 1)
	a := tn.nodes[0]
	client := fake.NewClientset(a.nodeObject(), remoteNode("node-b", "10.244.2.0/24", "", "172.31.2.10"))
	stop := startAgent(t, Config{NodeName: a.name, NetNS: a.netns.Path(), Mode: ModeDirect}, client)
	testutil.EventuallyWithin(t, 10*time.Second, "route for node B", func() error {
		if r, err := findRoute(a.h, netip.MustParsePrefix("10.244.2.0/24")); err != nil || r == nil {
			return fmt.Errorf("no route (%v)", err)
		}
		return nil
	})
	stop()
	// The device of a vxlan agent too.
	stop = startAgent(t, Config{NodeName: a.name, NetNS: a.netns.Path(), ResyncPeriod: time.Hour}, client)
	annotations(t, client, a.name, ModeVXLAN)
	stop()
	if _, err := a.h.LinkByName(DefaultDevice); err != nil {
		t.Fatalf("no device before cleanup: %v", err)
	}
	if !strings.Contains(nftTables(t, a.netns), TableName) {
		t.Fatal("no table before cleanup")
	}

	for i := range 2 { // the second finds nothing to do
		if err := Cleanup(context.Background(), a.netns.Path(), ""); err != nil {
			t.Fatalf("cleanup %d: %v", i, err)
		}
	}
	if _, err := a.h.LinkByName(DefaultDevice); err == nil {
		t.Error("device left")
	}
	if strings.Contains(nftTables(t, a.netns), TableName) {
		t.Error("table left")
	}
	rs, err := a.h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: routeProtocol}, netlink.RT_FILTER_PROTOCOL)
	if err != nil || len(rs) != 0 {
		t.Errorf("routes of the agent left: %v (%v)", rs, err)
	}
	if _, err := a.h.LinkByName("eth0"); err != nil {
		t.Errorf("cleanup took the underlay: %v", err)
	}
}

func TestRunFailsWithoutUnderlay(t *testing.T) {
	tn := newTestNet(t, 1)
	a := tn.nodes[0]
	agent, err := New(Config{NodeName: a.name, NetNS: a.netns.Path(), Underlay: "eth9"}, fake.NewClientset(a.nodeObject()))
	must(t, "new", err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = agent.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "underlay eth9") {
		t.Fatalf("Run = %v, want an error naming underlay eth9", err)
	}
	if _, err := a.h.LinkByName(DefaultDevice); err == nil {
		t.Error("device made although the node could not be set up")
	}
	if strings.Contains(nftTables(t, a.netns), TableName) {
		t.Error("table made although the node could not be set up")
	}
}

func TestRunFailsWithoutNFT(t *testing.T) {
	tn := newTestNet(t, 1)
	a := tn.nodes[0]
	t.Setenv("PATH", t.TempDir())
	agent, err := New(Config{NodeName: a.name, NetNS: a.netns.Path()}, fake.NewClientset(a.nodeObject()))
	must(t, "new", err)
	err = agent.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "nftables") {
		t.Fatalf("Run = %v, want an error about nftables", err)
	}
	if _, err := a.h.LinkByName(DefaultDevice); err == nil {
		t.Error("device made although the node could not be set up")
	}
}

func TestRunFailsWithoutNamespace(t *testing.T) {
	agent, err := New(Config{NodeName: "n", NetNS: "/nonexistent/netns"}, fake.NewClientset())
	must(t, "new", err)
	err = agent.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "open network namespace /nonexistent/netns") {
		t.Fatalf("Run = %v, want an error naming the namespace", err)
	}
}
