package plugin

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/kubelab/kubelab/internal/cni/ipam"
	"github.com/kubelab/kubelab/internal/testutil"
)

func TestAddConnectsPods(t *testing.T) {
	n := newNode(t, "10.244.1.0/24")
	pod1, pod2 := testutil.NetNS(t), testutil.NetNS(t)
	r1 := n.mustAdd("c1", pod1)
	r2 := n.mustAdd("c2", pod2)
	subnet := netip.MustParsePrefix("10.244.1.0/24")
	var ips []netip.Addr
	for _, r := range []struct {
		id  string
		pod ns.NetNS
		rr  *types100.Result
	}{{"c1", pod1, r1}, {"c2", pod2, r2}} {
		rr := r.rr
		if len(rr.Interfaces) != 3 || rr.Interfaces[0].Name != "cni0" || rr.Interfaces[1].Name != HostVethName(r.id, "eth0") ||
			rr.Interfaces[2].Name != "eth0" || rr.Interfaces[2].Sandbox != r.pod.Path() || rr.Interfaces[2].Mac == "" {
			t.Fatalf("%s: interfaces %+v", r.id, rr.Interfaces)
		}
		if len(rr.IPs) != 1 || *rr.IPs[0].Interface != 2 || rr.IPs[0].Gateway.String() != "10.244.1.1" {
			t.Fatalf("%s: ips %+v", r.id, rr.IPs)
		}
		ip, _ := netip.AddrFromSlice(rr.IPs[0].Address.IP.To4())
		ones, _ := rr.IPs[0].Address.Mask.Size()
		if !subnet.Contains(ip) || ones != 24 || ip == netip.MustParseAddr("10.244.1.1") {
			t.Fatalf("%s: address %s not a pod address of %s", r.id, rr.IPs[0].Address.String(), subnet)
		}
		if len(rr.Routes) != 1 || rr.Routes[0].Dst.String() != "0.0.0.0/0" || rr.Routes[0].GW.String() != "10.244.1.1" {
			t.Fatalf("%s: routes %+v", r.id, rr.Routes)
		}
		ips = append(ips, ip)

		// The node's end: on the bridge, up, hairpin on, MTU 1450.
		hl := linkIn(t, n.ns, HostVethName(r.id, "eth0"))
		br := linkIn(t, n.ns, "cni0")
		if hl == nil || br == nil || hl.Attrs().MasterIndex != br.Attrs().Index || hl.Attrs().MTU != 1450 || hl.Attrs().Flags&net.FlagUp == 0 {
			t.Fatalf("%s: host end %+v, bridge %+v", r.id, hl, br)
		}
		if pi := hl.Attrs().Protinfo; pi == nil || !pi.Hairpin {
			// Protinfo is only filled by a dump of bridge ports; ask for it.
			var hairpin bool
			_ = n.ns.Do(func(ns.NetNS) error {
				info, err := netlink.LinkGetProtinfo(hl)
				hairpin = err == nil && info.Hairpin
				return err
			})
			if !hairpin {
				t.Fatalf("%s: hairpin mode is off on %s", r.id, hl.Attrs().Name)
			}
		}
		if pl := linkIn(t, r.pod, "eth0"); pl == nil || pl.Attrs().MTU != 1450 || pl.Attrs().Flags&net.FlagUp == 0 {
			t.Fatalf("%s: pod interface %+v", r.id, pl)
		}
	}
	if ips[0] == ips[1] {
		t.Fatalf("both pods got %s", ips[0])
	}
	// The bridge has the gateway.
	var brAddrs []netlink.Addr
	_ = n.ns.Do(func(ns.NetNS) error {
		br, _ := netlink.LinkByName("cni0")
		brAddrs, _ = netlink.AddrList(br, netlink.FAMILY_V4)
		return nil
	})
	if len(brAddrs) != 1 || brAddrs[0].IPNet.String() != "10.244.1.1/24" {
		t.Fatalf("bridge addresses %v, want 10.244.1.1/24", brAddrs)
	}

	// Pod to pod over the bridge, and pod to the gateway.
	serve(t, pod1, ips[0].String()+":8080", "pod1")
	got, err := dial(pod2, ips[0].String()+":8080")
	if err != nil || !strings.HasPrefix(got, "pod1 "+ips[1].String()+":") {
		t.Fatalf("pod2 → pod1: %q %v", got, err)
	}
	serve(t, n.ns, "10.244.1.1:9090", "node")
	if got, err := dial(pod1, "10.244.1.1:9090"); err != nil || !strings.HasPrefix(got, "node "+ips[0].String()+":") {
		t.Fatalf("pod1 → gateway: %q %v", got, err)
	}
	// CHECK agrees.
	if err := n.check("c1", pod1, n.conf(nil)); err != nil {
		t.Fatalf("CHECK: %v", err)
	}
}

func TestAddIsRejectedWhenIfaceExists(t *testing.T) {
	n := newNode(t, "10.244.2.0/24")
	pod := testutil.NetNS(t)
	n.mustAdd("c1", pod)
	_, err := n.add("c2", pod, n.conf(nil))
	wantCode(t, err, CodeInterfaceExists, "interface eth0 already exists in "+pod.Path())
	if l := linkIn(t, n.ns, HostVethName("c2", "eth0")); l != nil {
		t.Fatalf("veth %s left behind", l.Attrs().Name)
	}
	if files := n.ipamFiles(); len(files) != 1 {
		t.Fatalf("ipam files %v, want only c1's", files)
	}
	// A retried ADD of c1 into the same namespace fails the same way and keeps c1 working.
	_, err = n.add("c1", pod, n.conf(nil))
	wantCode(t, err, CodeInterfaceExists, "already exists")
	if err := n.check("c1", pod, n.conf(nil)); err != nil {
		t.Fatalf("c1 after the refused retry: %v", err)
	}
}

func TestDelIsIdempotentAndLeavesNothing(t *testing.T) {
	n := newNode(t, "10.244.3.0/24")
	pod := testutil.NetNS(t)
	n.mustAdd("c1", pod)
	for i := range 2 {
		if err := n.del("c1", pod, n.conf(nil)); err != nil {
			t.Fatalf("DEL %d: %v", i+1, err)
		}
		if l := linkIn(t, n.ns, HostVethName("c1", "eth0")); l != nil {
			t.Fatalf("DEL %d: veth %s left", i+1, l.Attrs().Name)
		}
		if l := linkIn(t, pod, "eth0"); l != nil {
			t.Fatalf("DEL %d: eth0 left in the pod", i+1)
		}
		if files := n.ipamFiles(); len(files) != 0 {
			t.Fatalf("DEL %d: ipam files %v left", i+1, files)
		}
	}
	// A netns that is gone, or none at all, is not an error.
	gone := filepath.Join(t.TempDir(), "no-such-netns")
	if _, err := n.call(func(p *Plugin) func(*skel.CmdArgs) error { return p.Del }, &skel.CmdArgs{ContainerID: "c1", Netns: gone, IfName: "eth0", StdinData: n.conf(nil)}); err != nil {
		t.Fatalf("DEL with a missing netns: %v", err)
	}
	if err := n.del("c1", nil, n.conf(nil)); err != nil {
		t.Fatalf("DEL without a netns: %v", err)
	}
	// The pod's namespace still works for a new ADD.
	if _, err := n.add("c2", pod, n.conf(nil)); err != nil {
		t.Fatalf("ADD after DEL: %v", err)
	}
}

func TestAddAfterCrashLeftovers(t *testing.T) {
	n := newNode(t, "10.244.4.0/24")
	pod := testutil.NetNS(t)
	hostName := HostVethName("c1", "eth0")
	// What an ADD killed halfway leaves: the bridge without its address, the address
	// allocated, and a veth with the attachment's name (its peer here in the node).
	var held netip.Addr
	err := n.ns.Do(func(ns.NetNS) error {
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "cni0"}}); err != nil {
			return err
		}
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hostName}, PeerName: "leftpeer"}); err != nil {
			return err
		}
		s, err := ipam.New(ipam.Config{Dir: n.dataDir, Subnet: netip.MustParsePrefix(n.subnet)})
		if err != nil {
			return err
		}
		// Something else holds the first address, so c1's is not the one ADD would pick.
		if _, err := s.Allocate(t.Context(), ipam.Attachment{ContainerID: "other", IfName: "eth0"}); err != nil {
			return err
		}
		held, err = s.Allocate(t.Context(), ipam.Attachment{ContainerID: "c1", IfName: "eth0"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	r := n.mustAdd("c1", pod)
	if got := r.IPs[0].Address.IP.String(); got != held.String() {
		t.Fatalf("ADD gave %s, want the address c1 already held, %s", got, held)
	}
	if l := linkIn(t, n.ns, "leftpeer"); l != nil {
		t.Fatal("the leftover veth pair is still there")
	}
	if err := n.check("c1", pod, n.conf(nil)); err != nil {
		t.Fatalf("CHECK after recovering: %v", err)
	}
	if files := n.ipamFiles(); len(files) != 2 {
		t.Fatalf("ipam files %v, want other's and c1's", files)
	}
}

func TestConcurrentAddsGetDistinctAddresses(t *testing.T) {
	n := newNode(t, "10.244.5.0/24")
	bin := pluginBinary(t)
	const pods = 20
	podNS := make([]ns.NetNS, pods)
	for i := range podNS {
		podNS[i] = testutil.NetNS(t)
	}
	results := make([][]byte, pods)
	errs := make([]error, pods)
	var wg sync.WaitGroup
	for i := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = execPlugin(n.ns, bin, cniEnv("ADD", fmt.Sprint("c", i), podNS[i]), n.conf(nil))
		}()
	}
	wg.Wait()
	seen := map[string]int{}
	for i := range pods {
		if errs[i] != nil {
			t.Fatalf("ADD c%d: %v", i, errs[i])
		}
		ip := parseResult(t, n.conf(nil), results[i]).IPs[0].Address.IP.String()
		if j, dup := seen[ip]; dup {
			t.Fatalf("%s given to c%d and c%d", ip, j, i)
		}
		seen[ip] = i
	}
	if files := n.ipamFiles(); len(files) != pods {
		t.Fatalf("%d ipam files, want %d", len(files), pods)
	}
	// Every pod reaches the gateway through the one bridge the racing ADDs made.
	serve(t, n.ns, "10.244.5.1:9090", "node")
	for i := range pods {
		if _, err := dial(podNS[i], "10.244.5.1:9090"); err != nil {
			t.Fatalf("c%d → gateway: %v", i, err)
		}
	}
	for i := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = execPlugin(n.ns, bin, cniEnv("DEL", fmt.Sprint("c", i), podNS[i]), n.conf(nil))
		}()
	}
	wg.Wait()
	for i := range pods {
		if errs[i] != nil {
			t.Fatalf("DEL c%d: %v", i, errs[i])
		}
	}
	if files := n.ipamFiles(); len(files) != 0 {
		t.Fatalf("ipam files left after DEL: %v", files)
	}
}

func TestExhaustedRange(t *testing.T) {
	n := newNode(t, "10.244.6.8/29")
	for i := range 5 {
		n.mustAdd(fmt.Sprint("c", i), testutil.NetNS(t))
	}
	pod := testutil.NetNS(t)
	_, err := n.add("c5", pod, n.conf(nil))
	wantCode(t, err, CodeRangeFull, "no free address in 10.244.6.8/29: all 5 in use")
	if l := linkIn(t, n.ns, HostVethName("c5", "eth0")); l != nil {
		t.Fatal("veth of the refused pod left behind")
	}
	if l := linkIn(t, pod, "eth0"); l != nil {
		t.Fatal("eth0 left in the refused pod")
	}
	if files := n.ipamFiles(); len(files) != 5 {
		t.Fatalf("ipam files %v, want the 5 pods'", files)
	}
}

func TestRollbackOnLateFailure(t *testing.T) {
	n := newNode(t, "10.244.7.0/24")
	pod := testutil.NetNS(t)
	// The pod's namespace already routes by default elsewhere: the default route cannot
	// be added, the last step of configuring the pod.
	err := pod.Do(func(ns.NetNS) error {
		d := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "side0"}, PeerName: "side1"}
		if err := netlink.LinkAdd(d); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(d); err != nil {
			return err
		}
		if err := netlink.AddrAdd(d, &netlink.Addr{IPNet: prefixToIPNet(netip.MustParsePrefix("192.168.77.2/24"))}); err != nil {
			return err
		}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: d.Attrs().Index, Dst: prefixToIPNet(netip.MustParsePrefix("0.0.0.0/0")), Gw: net.ParseIP("192.168.77.1")})
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = n.add("c1", pod, n.conf(nil))
	wantCode(t, err, CodeNodeNetwork, "add default route via 10.244.7.1")
	if l := linkIn(t, n.ns, HostVethName("c1", "eth0")); l != nil {
		t.Fatal("veth left behind after a failed ADD")
	}
	if l := linkIn(t, pod, "eth0"); l != nil {
		t.Fatal("eth0 left in the pod after a failed ADD")
	}
	if files := n.ipamFiles(); len(files) != 0 {
		t.Fatalf("ipam files %v left after a failed ADD", files)
	}
}

func TestCheckFailsWhenAddressRemoved(t *testing.T) {
	n := newNode(t, "10.244.8.0/24")
	pod := testutil.NetNS(t)
	r := n.mustAdd("c1", pod)
	prev, err := r.GetAsVersion("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	withPrev := n.conf(map[string]any{"prevResult": prev})
	if err := n.check("c1", pod, withPrev); err != nil {
		t.Fatalf("CHECK of a fresh pod: %v", err)
	}
	err = pod.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		return netlink.AddrDel(l, &netlink.Addr{IPNet: &r.IPs[0].Address})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = n.check("c1", pod, withPrev)
	wantCode(t, err, CodeCheckFailed, "pod interface eth0 does not have its address "+r.IPs[0].Address.String())
	// CHECK of an attachment that has no address at all.
	wantCode(t, n.check("nobody", pod, n.conf(nil)), CodeCheckFailed, "no address of 10.244.8.0/24 is allocated to container nobody")
}

func TestGCReleasesStaleAllocations(t *testing.T) {
	n := newNode(t, "10.244.9.0/24")
	n.version = "1.1.0"
	pods := map[string]ns.NetNS{"a": testutil.NetNS(t), "b": testutil.NetNS(t), "c": testutil.NetNS(t)}
	for id, pod := range pods {
		n.mustAdd(id, pod)
	}
	conf := n.conf(map[string]any{"cni.dev/valid-attachments": []ipam.Attachment{{ContainerID: "b", IfName: "eth0"}}})
	if _, err := n.call(func(p *Plugin) func(*skel.CmdArgs) error { return p.GC }, &skel.CmdArgs{StdinData: conf}); err != nil {
		t.Fatalf("GC: %v", err)
	}
	s, err := ipam.New(ipam.Config{Dir: n.dataDir, Subnet: netip.MustParsePrefix(n.subnet)})
	if err != nil {
		t.Fatal(err)
	}
	left, err := s.List(t.Context())
	if err != nil || len(left) != 1 || left[0].ContainerID != "b" {
		t.Fatalf("allocations after GC %v %v, want only b's", left, err)
	}
	for _, id := range []string{"a", "c"} {
		if l := linkIn(t, n.ns, HostVethName(id, "eth0")); l != nil {
			t.Fatalf("veth of %s left after GC", id)
		}
	}
	if err := n.check("b", pods["b"], n.conf(nil)); err != nil {
		t.Fatalf("b after GC: %v", err)
	}
}

func TestStatus(t *testing.T) {
	n := newNode(t, "10.244.10.0/24")
	n.version = "1.1.0"
	if _, err := n.call(func(p *Plugin) func(*skel.CmdArgs) error { return p.Status }, &skel.CmdArgs{StdinData: n.conf(nil)}); err != nil {
		t.Fatalf("STATUS: %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	n.dataDir = filepath.Join(file, "ipam") // under a regular file: cannot be made
	_, err := n.call(func(p *Plugin) func(*skel.CmdArgs) error { return p.Status }, &skel.CmdArgs{StdinData: n.conf(nil)})
	wantCode(t, err, types.ErrPluginNotAvailable, "not writable")
	n.dataDir = "relative"
	_, err = n.call(func(p *Plugin) func(*skel.CmdArgs) error { return p.Status }, &skel.CmdArgs{StdinData: n.conf(nil)})
	wantCode(t, err, types.ErrInvalidNetworkConfig, `dataDir "relative" must be an absolute path`)
}
