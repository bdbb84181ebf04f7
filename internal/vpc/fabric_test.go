package vpc

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/util/netns"
)

func TestDesiredState(t *testing.T) {
	desired := map[string][]Interface{
		"i-a": {{ID: "eni-a0", DeviceIndex: 0, MAC: "0E:00:00:00:00:0A", IPs: []string{"172.31.0.11", "172.31.0.30"}}},
		"i-b": {
			{ID: "eni-b0", DeviceIndex: 0, MAC: "0e:00:00:00:00:0b", IPs: []string{"172.31.0.12"}},
			{ID: "eni-b1", DeviceIndex: 1, MAC: "0e:00:00:00:00:b1", IPs: []string{"172.31.0.20", "172.31.0.21"}},
		},
		"i-c": {{ID: "eni-c0", DeviceIndex: 0, MAC: "0e:00:00:00:00:0c", IPs: []string{"172.31.0.13", "172.31.0.40"}}},
	}
	got := desiredState(desired, map[string]string{"i-a": "a", "i-b": "b"})
	all := map[string]string{"172.31.0.30": "0e:00:00:00:00:0a", "172.31.0.20": "0e:00:00:00:00:b1",
		"172.31.0.21": "0e:00:00:00:00:b1", "172.31.0.40": "0e:00:00:00:00:0c"}
	want := map[string]nsState{
		"": {Links: map[string]eniLink{}, Neigh: all},
		"a": {Links: map[string]eniLink{}, Neigh: map[string]string{"172.31.0.20": "0e:00:00:00:00:b1",
			"172.31.0.21": "0e:00:00:00:00:b1", "172.31.0.40": "0e:00:00:00:00:0c"}},
		"b": {Links: map[string]eniLink{"eth1": {Name: "eth1", ENI: "eni-b1", MAC: "0e:00:00:00:00:b1", IP: "172.31.0.20"}},
			Neigh: map[string]string{"172.31.0.30": "0e:00:00:00:00:0a", "172.31.0.40": "0e:00:00:00:00:0c"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("desired state\n got %+v\nwant %+v", got, want)
	}
}

func TestPlan(t *testing.T) {
	eth1 := eniLink{Name: "eth1", ENI: "eni-1", MAC: "0e:00:00:00:00:01", IP: "172.31.0.20"}
	eth1Other := eniLink{Name: "eth1", ENI: "eni-2", MAC: "0e:00:00:00:00:02", IP: "172.31.0.30"}
	eth2 := eniLink{Name: "eth2", ENI: "eni-3", MAC: "0e:00:00:00:00:03", IP: "172.31.0.40"}
	st := func(links []eniLink, neigh ...string) nsState {
		s := nsState{Links: map[string]eniLink{}, Neigh: map[string]string{}}
		for _, l := range links {
			s.Links[l.Name] = l
		}
		for i := 0; i+1 < len(neigh); i += 2 {
			s.Neigh[neigh[i]] = neigh[i+1]
		}
		return s
	}
	for _, tc := range []struct {
		name            string
		desired, actual nsState
		want            []string
	}{
		{"nothing", st(nil), st(nil), nil},
		{"converged", st([]eniLink{eth1}, "172.31.0.21", "0e:00:00:00:00:01"), st([]eniLink{eth1}, "172.31.0.21", "0e:00:00:00:00:01"), nil},
		{"attach", st([]eniLink{eth1}), st(nil), []string{"add-link eth1 eni-1 0e:00:00:00:00:01 172.31.0.20"}},
		{"detach", st(nil), st([]eniLink{eth1, eth2}), []string{
			"del-link eth1 eni-1 0e:00:00:00:00:01 172.31.0.20", "del-link eth2 eni-3 0e:00:00:00:00:03 172.31.0.40"}},
		{"another interface at the index", st([]eniLink{eth1Other}), st([]eniLink{eth1}), []string{
			"del-link eth1 eni-1 0e:00:00:00:00:01 172.31.0.20", "add-link eth1 eni-2 0e:00:00:00:00:02 172.31.0.30"}},
		{"assign and unassign", st(nil, "172.31.0.21", "0e:00:00:00:00:01", "172.31.0.22", "0e:00:00:00:00:01"),
			st(nil, "172.31.0.22", "0e:00:00:00:00:01", "172.31.0.23", "0e:00:00:00:00:01"), []string{
				"del-neigh 172.31.0.23 0e:00:00:00:00:01", "set-neigh 172.31.0.21 0e:00:00:00:00:01"}},
		{"reassigned to another interface", st(nil, "172.31.0.21", "0e:00:00:00:00:02"), st(nil, "172.31.0.21", "0e:00:00:00:00:01"),
			[]string{"set-neigh 172.31.0.21 0e:00:00:00:00:02"}},
		{"links before entries", st([]eniLink{eth2}, "172.31.0.21", "0e:00:00:00:00:03"), st([]eniLink{eth1}), []string{
			"del-link eth1 eni-1 0e:00:00:00:00:01 172.31.0.20", "add-link eth2 eni-3 0e:00:00:00:00:03 172.31.0.40",
			"set-neigh 172.31.0.21 0e:00:00:00:00:03"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, s := range plan(tc.desired, tc.actual) {
				got = append(got, s.String())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plan\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// podIn makes a "pod" namespace behind node's namespace as a VPC CNI would: a veth whose
// pod end has ip/32 and a default route via the host end (169.254.1.1), and a /32 route
// to ip on the host end. It returns the pod namespace's path.
func podIn(t *testing.T, v *VPC, node, name, ip string) string {
	t.Helper()
	path := v.NodePath(name) // under the cluster's prefix: Remove deletes it
	if err := ensureNetNS(path); err != nil {
		t.Fatal(err)
	}
	host := "vp" + name
	err := withHandle(node, func(h *netlink.Handle) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		attrs := netlink.NewLinkAttrs()
		attrs.Name = host
		if err := h.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(f.Fd()))}); err != nil {
			return err
		}
		l, err := h.LinkByName(host)
		if err != nil {
			return err
		}
		if err := ensureAddr(h, l, "169.254.1.1/32"); err != nil {
			return err
		}
		if err := h.LinkSetUp(l); err != nil {
			return err
		}
		_, dst, _ := net.ParseCIDR(ip + "/32")
		return h.RouteReplace(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst, Scope: netlink.SCOPE_LINK})
	})
	if err != nil {
		t.Fatalf("pod veth in node: %v", err)
	}
	err = withHandle(path, func(h *netlink.Handle) error {
		if err := setUp(h, "lo"); err != nil {
			return err
		}
		l, err := h.LinkByName("eth0")
		if err != nil {
			return err
		}
		if err := ensureAddr(h, l, ip+"/32"); err != nil {
			return err
		}
		if err := h.LinkSetUp(l); err != nil {
			return err
		}
		gw := net.ParseIP("169.254.1.1")
		if err := h.RouteReplace(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: &net.IPNet{IP: gw, Mask: net.CIDRMask(32, 32)}, Scope: netlink.SCOPE_LINK}); err != nil {
			return err
		}
		return h.RouteReplace(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: gw})
	})
	if err != nil {
		t.Fatalf("pod namespace: %v", err)
	}
	return path
}

// dialFromAddr is dialFrom with the source address src and a short timeout.
func dialFromAddr(path, src, addr string) (string, error) {
	var c net.Conn
	err := netns.Do(path, func() (err error) {
		d := net.Dialer{Timeout: 2 * time.Second}
		if src != "" {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
		}
		c, err = d.Dial("tcp", addr)
		return err
	})
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("hi\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

func neighbours(t *testing.T, path, dev string) map[string]netlink.Neigh {
	t.Helper()
	out := map[string]netlink.Neigh{}
	err := withHandle(path, func(h *netlink.Handle) error {
		l, err := h.LinkByName(dev)
		if err != nil {
			return err
		}
		list, err := h.NeighList(l.Attrs().Index, netlink.FAMILY_V4)
		for _, n := range list {
			out[n.IP.String()] = n
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func linkIn(path, name string) (netlink.Link, error) {
	var l netlink.Link
	err := withHandle(path, func(h *netlink.Handle) (err error) {
		l, err = h.LinkByName(name)
		return err
	})
	return l, err
}

// A second interface attached to node b's instance becomes b's eth1; a secondary address
// of it reaches a pod behind b from node a and from the control plane's address in the
// VPC (directly, and through the VPC's router), and the replies come back; unassigned, it
// is reachable no more; detached, eth1 goes.
func TestFabricDeliversSecondaryAddresses(t *testing.T) {
	v := newTestVPC(t)
	a, err := v.EnsureNode(Node{Name: "a", IP: "172.31.0.11", MAC: "0e:00:00:00:00:0a", InstanceID: "i-a"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := v.EnsureNode(Node{Name: "b", IP: "172.31.0.12", MAC: "0e:00:00:00:00:0b", InstanceID: "i-b"})
	if err != nil {
		t.Fatal(err)
	}
	eth0A := Interface{ID: "eni-a0", MAC: "0e:00:00:00:00:0a", IPs: []string{"172.31.0.11"}}
	eth0B := Interface{ID: "eni-b0", MAC: "0e:00:00:00:00:0b", IPs: []string{"172.31.0.12"}}
	eth1B := Interface{ID: "eni-b1", DeviceIndex: 1, MAC: "0e:00:00:00:00:b1", IPs: []string{"172.31.0.20", "172.31.0.21", "172.31.0.22"}}
	f := v.Fabric()
	f.Sync(map[string][]Interface{"i-a": {eth0A}, "i-b": {eth0B}})
	f.SetInstance("i-b", []Interface{eth0B, eth1B})

	l, err := linkIn(b, "eth1")
	if err != nil {
		t.Fatalf("no eth1 in node b: %v", err)
	}
	if l.Attrs().HardwareAddr.String() != eth1B.MAC || l.Attrs().Alias != eth1B.ID || l.Attrs().OperState == netlink.OperDown {
		t.Errorf("eth1 of node b: mac %s alias %q state %s", l.Attrs().HardwareAddr, l.Attrs().Alias, l.Attrs().OperState)
	}
	pod := podIn(t, v, b, "pod1", "172.31.0.21")
	target := echoIn(t, pod, "172.31.0.21:8080", "pod:")

	reach := func(from, src string) func() error {
		return func() error {
			got, err := dialFromAddr(from, src, target)
			if err == nil && got != "pod:hi" {
				err = fmt.Errorf("answer %q", got)
			}
			return err
		}
	}
	testutil.Eventually(t, "node a reaches the pod at b's secondary address", reach(a, ""))
	testutil.Eventually(t, "the control plane's address reaches the pod", reach(v.Path(), ControlPlaneIP))
	// Through the VPC's router, as a node that routes a pod's traffic via its gateway.
	_, dst, _ := net.ParseCIDR("172.31.0.21/32")
	viaRouter := &netlink.Route{Dst: dst, Gw: net.ParseIP(RouterIP)}
	if err := withHandle(a, func(h *netlink.Handle) error { return h.RouteAdd(viaRouter) }); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "node a reaches the pod through the router", reach(a, ""))
	if err := withHandle(a, func(h *netlink.Handle) error { return h.RouteDel(viaRouter) }); err != nil {
		t.Fatal(err)
	}

	// Unassigned: no node or VPC entry maps it any more, and it is unreachable.
	eth1B.IPs = []string{"172.31.0.20", "172.31.0.22"}
	f.SetInstance("i-b", []Interface{eth0B, eth1B})
	for _, p := range []string{a, v.Path()} {
		dev := NodeInterface
		if p == v.Path() {
			dev = Bridge
		}
		n, ok := neighbours(t, p, dev)["172.31.0.21"]
		if ok && n.State == netlink.NUD_PERMANENT {
			t.Errorf("%s still maps the unassigned address: %v", p, n)
		}
		if got := neighbours(t, p, dev)["172.31.0.22"]; got.HardwareAddr.String() != eth1B.MAC {
			t.Errorf("%s maps 172.31.0.22 to %v, want %s", p, got.HardwareAddr, eth1B.MAC)
		}
	}
	testutil.Eventually(t, "node a no longer reaches the unassigned address", func() bool { return reach(a, "")() != nil })
	testutil.Eventually(t, "the control plane no longer reaches it", func() bool { return reach(v.Path(), ControlPlaneIP)() != nil })

	// Detached: eth1 is gone.
	f.SetInstance("i-b", []Interface{eth0B})
	if _, err := linkIn(b, "eth1"); err == nil {
		t.Errorf("eth1 is still in node b after the detach")
	}
}

// A new fabric (a restart after kill -9) corrects what it finds: its stale entries and
// links go, missing ones come; entries and links it did not make stay.
func TestFabricConvergesAfterRestart(t *testing.T) {
	v := newTestVPC(t)
	a, err := v.EnsureNode(Node{Name: "a", IP: "172.31.0.11", MAC: "0e:00:00:00:00:0a", InstanceID: "i-a"})
	if err != nil {
		t.Fatal(err)
	}
	eth0A := Interface{ID: "eni-a0", MAC: "0e:00:00:00:00:0a", IPs: []string{"172.31.0.11"}}
	eth1A := Interface{ID: "eni-a1", DeviceIndex: 1, MAC: "0e:00:00:00:00:a1", IPs: []string{"172.31.0.20", "172.31.0.21"}}
	eth2A := Interface{ID: "eni-a2", DeviceIndex: 2, MAC: "0e:00:00:00:00:a2", IPs: []string{"172.31.0.30"}}
	v.Fabric().Sync(map[string][]Interface{"i-a": {eth0A, eth1A, eth2A}, "i-b": {{ID: "eni-b0", MAC: "0e:00:00:00:00:0b", IPs: []string{"172.31.0.12", "172.31.0.40"}}}})
	// What others made: a permanent entry without extern_learn and a veth.
	err = withHandle(a, func(h *netlink.Handle) error {
		eth0, err := h.LinkByName(NodeInterface)
		if err != nil {
			return err
		}
		if err := h.NeighSet(&netlink.Neigh{LinkIndex: eth0.Attrs().Index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
			IP: net.ParseIP("172.31.0.99"), HardwareAddr: net.HardwareAddr{0x0e, 0, 0, 0, 0, 0x99}}); err != nil {
			return err
		}
		attrs := netlink.NewLinkAttrs()
		attrs.Name = "other0"
		return h.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: "other1"})
	})
	if err != nil {
		t.Fatal(err)
	}

	// The next run: eth2 was detached, b's address unassigned and a new one assigned
	// while kubelab was down.
	v2, err := New(Config{DataDir: v.cfg.DataDir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v2.EnsureNode(Node{Name: "a", IP: "172.31.0.11", MAC: "0e:00:00:00:00:0a", InstanceID: "i-a"}); err != nil {
		t.Fatal(err)
	}
	v2.Fabric().Sync(map[string][]Interface{"i-a": {eth0A, eth1A}, "i-b": {{ID: "eni-b0", MAC: "0e:00:00:00:00:0b", IPs: []string{"172.31.0.12", "172.31.0.41"}}}})
	if _, err := linkIn(a, "eth1"); err != nil {
		t.Errorf("eth1 went: %v", err)
	}
	if _, err := linkIn(a, "eth2"); err == nil {
		t.Errorf("eth2 stayed after its detach")
	}
	for _, name := range []string{"other0", "other1"} {
		if _, err := linkIn(a, name); err != nil {
			t.Errorf("the fabric removed %s, which it did not make: %v", name, err)
		}
	}
	got := neighbours(t, a, NodeInterface)
	if _, ok := got["172.31.0.40"]; ok {
		t.Errorf("the stale entry for 172.31.0.40 stayed")
	}
	if n := got["172.31.0.41"]; n.Flags&netlink.NTF_EXT_LEARNED == 0 || n.HardwareAddr.String() != "0e:00:00:00:00:0b" {
		t.Errorf("entry for 172.31.0.41: %+v", n)
	}
	if n, ok := got["172.31.0.99"]; !ok || n.State != netlink.NUD_PERMANENT {
		t.Errorf("the fabric removed an entry it did not make: %+v", got)
	}
	// The router forwards within the VPC and has a blackhole default route.
	err = netns.Do(v2.Path(), func() error {
		b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
		if err != nil || strings.TrimSpace(string(b)) != "1" {
			t.Errorf("ip_forward in the VPC = %q, %v", b, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = withHandle(v2.Path(), func(h *netlink.Handle) error {
		routes, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
		for _, r := range routes {
			if r.Dst == nil || r.Dst.String() == "0.0.0.0/0" {
				if r.Type != unix.RTN_BLACKHOLE {
					t.Errorf("default route of the VPC: %+v", r)
				}
				return err
			}
		}
		t.Errorf("no default route in the VPC: %v", routes)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
