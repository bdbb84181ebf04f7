package netpol

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/knftables"

	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/util/netns"
)

// Tests with real nft inside network namespaces they create. The node namespace holds
// the bridge cni0 (10.244.1.1/24) with ip_forward and bridge-nf-call-iptables on; each
// pod namespace has eth0 (10.244.1.<n>/24) on a veth into cni0 (hairpin mode on).

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

func sysctl(t testing.TB, n ns.NetNS, key, value string) {
	t.Helper()
	must(t, "sysctl "+key, n.Do(func(ns.NetNS) error {
		return os.WriteFile("/proc/sys/"+strings.ReplaceAll(key, ".", "/"), []byte(value), 0o644)
	}))
}

// testPod is a pod namespace on the node's bridge with a TCP server that answers every
// connection with the pod's name.
type testPod struct {
	name string
	ip   string
	ns   ns.NetNS
}

const podPort = 8080

// newNode makes the node namespace and a pod namespace per name, at 10.244.1.2, .3, ….
func newNode(t testing.TB, names ...string) (ns.NetNS, map[string]*testPod) {
	t.Helper()
	testutil.RequireRoot(t, "nft")
	node := testutil.NetNS(t)
	h := testutil.NetlinkHandle(t, node)
	linkUp(t, h, "lo")
	sysctl(t, node, "net.ipv4.ip_forward", "1")
	sysctl(t, node, "net.bridge.bridge-nf-call-iptables", "1")
	la := netlink.NewLinkAttrs()
	la.Name = "cni0"
	must(t, "add bridge cni0", h.LinkAdd(&netlink.Bridge{LinkAttrs: la}))
	br := linkUp(t, h, "cni0")
	addAddr(t, h, br, "10.244.1.1/24")
	pods := map[string]*testPod{}
	for i, name := range names {
		p := &testPod{name: name, ip: fmt.Sprintf("10.244.1.%d", i+2), ns: testutil.NetNS(t)}
		ph := testutil.NetlinkHandle(t, p.ns)
		linkUp(t, ph, "lo")
		veth := "veth" + name
		la := netlink.NewLinkAttrs()
		la.Name = veth
		must(t, "add veth "+veth, h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "eth0",
			PeerNamespace: netlink.NsFd(int(p.ns.Fd()))}))
		port := linkUp(t, h, veth)
		must(t, "enslave "+veth, h.LinkSetMaster(port, br))
		must(t, "hairpin on "+veth, h.LinkSetHairpin(port, true)) // as kubelab's CNI plugin does
		addAddr(t, ph, linkUp(t, ph, "eth0"), p.ip+"/24")
		must(t, "default route of "+name, ph.RouteAdd(&netlink.Route{Gw: net.ParseIP("10.244.1.1")}))
		var l net.Listener
		must(t, "listen in "+name, p.ns.Do(func(ns.NetNS) error {
			var err error
			l, err = net.Listen("tcp4", fmt.Sprintf("%s:%d", p.ip, podPort))
			return err
		}))
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Write([]byte(name))
				c.Close()
			}
		}()
		pods[name] = p
	}
	return node, pods
}

// dial connects from pod src to pod dst's server and reads its name, giving up after
// timeout.
func dial(src, dst *testPod, timeout time.Duration) error {
	var c net.Conn
	err := src.ns.Do(func(ns.NetNS) error {
		var err error
		c, err = net.DialTimeout("tcp4", fmt.Sprintf("%s:%d", dst.ip, podPort), timeout)
		return err
	})
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		return err
	}
	if string(b) != dst.name {
		return fmt.Errorf("answer %q, want %q", b, dst.name)
	}
	return nil
}

// blockedDial is how long a dial waits before it counts as blocked; dials that must
// succeed are polled with a longer one.
const blockedDial = 300 * time.Millisecond

func requireConnects(t testing.TB, src, dst *testPod) {
	t.Helper()
	testutil.EventuallyWithin(t, 10*time.Second, fmt.Sprintf("%s connects to %s", src.name, dst.name), func() error { return dial(src, dst, time.Second) })
}

func requireBlocked(t testing.TB, src, dst *testPod) {
	t.Helper()
	if err := dial(src, dst, blockedDial); err == nil {
		t.Fatalf("%s connected to %s, want it blocked", src.name, dst.name)
	} else if !os.IsTimeout(err) {
		t.Fatalf("%s to %s: %v, want a timeout (dropped SYN)", src.name, dst.name, err)
	}
}

// addTestService makes addr:podPort a Service address of pod dst in the node namespace
// the way a proxy does: DNAT to the pod before forward, masquerading traffic a pod sends
// to itself. It returns a dial target for the address.
func addTestService(t testing.TB, node ns.NetNS, addr string, dst *testPod) *testPod {
	t.Helper()
	table := "netpol-test-service"
	script := fmt.Sprintf(`table ip %[1]s {
	chain pre { type nat hook prerouting priority dstnat; ip daddr %[2]s tcp dport %[3]d dnat to %[4]s:%[3]d; }
	chain post { type nat hook postrouting priority srcnat; ip saddr %[4]s ip daddr %[4]s masquerade; }
}
`, table, addr, podPort, dst.ip)
	nftScript := func(script string) error {
		return node.Do(func(ns.NetNS) error {
			cmd := exec.Command("nft", "-f", "-")
			cmd.Stdin = strings.NewReader(script)
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			return nil
		})
	}
	must(t, "add service table", nftScript(script))
	t.Cleanup(func() {
		if err := nftScript("delete table ip " + table + "\n"); err != nil {
			t.Errorf("delete service table: %v", err)
		}
	})
	return &testPod{name: dst.name, ip: addr}
}

// listNFT opens the table inside the node namespace for reading.
func listNFT(t testing.TB, node ns.NetNS, table string) knftables.Interface {
	t.Helper()
	nft, err := netns.NFTables(node.Path(), knftables.IPv4Family, table)
	must(t, "open table", err)
	return nft
}

// elementKeys lists the keys of a set or map ("" when it does not exist).
func elementKeys(nft knftables.Interface, objType, name string) ([]string, error) {
	es, err := nft.ListElements(context.Background(), objType, name)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range es {
		out = append(out, strings.Join(e.Key, " . "))
	}
	slices.Sort(out)
	return out, nil
}

func TestEnforceInNamespaces(t *testing.T) {
	nodeNS, pods := newNode(t, "a", "b", "c")
	a, b, c := pods["a"], pods["b"], pods["c"]
	node := &testPod{name: "node", ns: nodeNS}
	ctx := context.Background()
	client := fake.NewClientset()
	seed(t, client, Inputs{
		Namespaces: []*corev1.Namespace{mkNS("default", nil)},
		Pods: []*corev1.Pod{
			mkPod("default", "a", "node-1", a.ip, lbl("app", "a")),
			mkPod("default", "b", "node-1", b.ip, lbl("app", "b")),
			mkPod("default", "c", "node-1", c.ip, lbl("app", "c")),
		},
	})
	cfg := Config{NodeName: "node-1", NetNS: nodeNS.Path(), Table: testTable}
	stop := startAgent(t, cfg, client)
	nft := listNFT(t, nodeNS, testTable)
	policies := client.NetworkingV1().NetworkPolicies("default")
	waitKeys := func(what, objType, name string, want ...string) {
		t.Helper()
		testutil.EventuallyWithin(t, 10*time.Second, what, func() error {
			got, err := elementKeys(nft, objType, name)
			if err != nil {
				return err
			}
			if !slices.Equal(got, want) {
				return fmt.Errorf("%s %s holds %v, want %v", objType, name, got, want)
			}
			return nil
		})
	}

	// No policy: the table is there and everything is open.
	waitKeys("empty table", "map", ingressPodsMap)
	requireConnects(t, a, b)
	requireConnects(t, c, a)

	// Deny all ingress to b.
	_, err := policies.Create(ctx, mkPolicy("default", "deny-b", sel("app", "b"), ingressT), metav1.CreateOptions{})
	must(t, "create deny-b", err)
	waitKeys("b isolated", "map", ingressPodsMap, b.ip)
	requireBlocked(t, a, b)
	requireBlocked(t, c, b)
	requireConnects(t, c, a)
	requireConnects(t, b, a)
	requireConnects(t, node, b) // the node itself always reaches its pods
	// b reaches itself through a Service address, a sends there in vain.
	svc := addTestService(t, nodeNS, "10.96.0.10", b)
	requireConnects(t, b, svc)
	requireBlocked(t, a, svc)

	// Allow pods labelled like a, on the server's port.
	allowA := withIngress(mkPolicy("default", "allow-a", sel("app", "b"), ingressT),
		networkingv1.NetworkPolicyIngressRule{
			From:  []networkingv1.NetworkPolicyPeer{podPeer(sel("app", "a"))},
			Ports: []networkingv1.NetworkPolicyPort{numPort(tcp, podPort)},
		})
	_, err = policies.Create(ctx, allowA, metav1.CreateOptions{})
	must(t, "create allow-a", err)
	waitKeys("a allowed", "set", "peers-default/allow-a-ingress-0", a.ip)
	requireConnects(t, a, b)
	requireBlocked(t, c, b)

	// Deny all egress of a: its new connections stop, replies to connections made to it
	// still pass.
	_, err = policies.Create(ctx, mkPolicy("default", "deny-a-out", sel("app", "a"), egressT), metav1.CreateOptions{})
	must(t, "create deny-a-out", err)
	waitKeys("a egress isolated", "map", egressPodsMap, a.ip)
	requireBlocked(t, a, b)
	requireBlocked(t, a, c)
	requireConnects(t, c, a)

	// Deleting the policies opens everything again.
	for _, name := range []string{"deny-b", "allow-a", "deny-a-out"} {
		must(t, "delete "+name, policies.Delete(ctx, name, metav1.DeleteOptions{}))
	}
	waitKeys("b open", "map", ingressPodsMap)
	waitKeys("a open", "map", egressPodsMap)
	requireConnects(t, a, b)
	requireConnects(t, a, c)
	requireConnects(t, c, b)

	stop()
	must(t, "cleanup", Cleanup(ctx, cfg))
	if _, err := nft.List(ctx, "chains"); !knftables.IsNotFound(err) {
		t.Errorf("after cleanup, listing the table: %v, want not found", err)
	}
	must(t, "second cleanup", Cleanup(ctx, cfg))
}

// TestRealNFTAcceptsRulesets applies the changes of clusterSteps, which use every kind
// of rule, set and element, to a real table as incremental transactions.
func TestRealNFTAcceptsRulesets(t *testing.T) {
	testutil.RequireRoot(t, "nft")
	ctx := context.Background()
	nodeNS := testutil.NetNS(t)
	nft, err := netns.NFTables(nodeNS.Path(), knftables.IPv4Family, testTable)
	must(t, "open table", err)
	s := &tableSyncer{nft: nft}
	for i, in := range clusterSteps() {
		rs := Render(Compute(in))
		if _, err := s.apply(ctx, rs, false); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		for _, m := range []struct {
			name string
			want map[string]string
		}{{ingressPodsMap, rs.Ingress}, {egressPodsMap, rs.Egress}} {
			got, err := elementKeys(nft, "map", m.name)
			must(t, "list "+m.name, err)
			if want := sortedKeys(m.want); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Errorf("step %d: map %s holds %v, want %v", i, m.name, got, want)
			}
		}
		chains, err := nft.List(ctx, "chains")
		must(t, "list chains", err)
		slices.Sort(chains)
		if want := append(sortedKeys(rs.Chains), forwardChain); !slices.Equal(chains, slices.Sorted(slices.Values(want))) {
			t.Errorf("step %d: chains %v, want %v", i, chains, want)
		}
		sets, err := nft.List(ctx, "sets")
		must(t, "list sets", err)
		slices.Sort(sets)
		if want := sortedKeys(rs.Sets); !slices.Equal(sets, want) && !(len(sets) == 0 && len(want) == 0) {
			t.Errorf("step %d: sets %v, want %v", i, sets, want)
		}
		for _, name := range sets {
			if rs.Sets[name] == nil || rs.Sets[name].Interval {
				continue
			}
			got, err := elementKeys(nft, "set", name)
			must(t, "list "+name, err)
			var want []string
			for _, e := range rs.Sets[name].Elements {
				want = append(want, strings.Join(e, " . "))
			}
			slices.Sort(want)
			if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Errorf("step %d: set %s holds %v, want %v", i, name, got, want)
			}
		}
	}
	// A full rewrite of a table that exists works too.
	if _, err := s.apply(ctx, Render(Compute(clusterSteps()[3])), true); err != nil {
		t.Fatalf("full sync: %v", err)
	}
	must(t, "cleanup", Cleanup(ctx, Config{NetNS: nodeNS.Path(), Table: testTable}))
}
