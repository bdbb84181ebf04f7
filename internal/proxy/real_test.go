package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/testutil"
)

// testNet is a node namespace with pods and a client routed through it, and a host on
// the VPC side ("outside") that reaches the node's address.
type testNet struct {
	node, outside ns.NetNS
	pods          map[string]ns.NetNS // name → namespace, addressed 10.244.<i>.2
}

const (
	nodeIP    = "172.31.0.5"
	outsideIP = "172.31.0.9"
)

func newNetNS(t testing.TB) ns.NetNS {
	t.Helper()
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.Close()
		if err := testutils.UnmountNS(n); err != nil {
			t.Errorf("remove namespace: %v", err)
		}
	})
	return n
}

func inNS(t *testing.T, n ns.NetNS, f func() error) {
	t.Helper()
	if err := n.Do(func(ns.NetNS) error { return f() }); err != nil {
		t.Fatal(err)
	}
}

// link joins the node to peer with a veth: nodeSide/addr in the node, eth0/peerAddr in
// peer with a default route through the node.
func link(t *testing.T, node, peer ns.NetNS, nodeSide, addr, peerAddr, gw string) {
	t.Helper()
	inNS(t, node, func() error {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: nodeSide}, PeerName: "eth0",
			PeerNamespace: netlink.NsFd(int(peer.Fd()))}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("add veth %s: %w", nodeSide, err)
		}
		return up(nodeSide, addr)
	})
	inNS(t, peer, func() error {
		if err := up("lo", ""); err != nil {
			return err
		}
		if err := up("eth0", peerAddr); err != nil {
			return err
		}
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: net.ParseIP(gw)})
	})
}

func up(name, addr string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	if addr != "" {
		a, err := netlink.ParseAddr(addr)
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(l, a); err != nil {
			return fmt.Errorf("address %s on %s: %w", addr, name, err)
		}
	}
	return netlink.LinkSetUp(l)
}

func newTestNet(t *testing.T, pods ...string) *testNet {
	tn := &testNet{node: newNetNS(t), outside: newNetNS(t), pods: map[string]ns.NetNS{}}
	inNS(t, tn.node, func() error {
		if err := up("lo", ""); err != nil {
			return err
		}
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
	})
	for i, name := range pods {
		n := newNetNS(t)
		tn.pods[name] = n
		link(t, tn.node, n, fmt.Sprintf("veth%d", i), fmt.Sprintf("10.244.%d.1/24", i+1),
			fmt.Sprintf("10.244.%d.2/24", i+1), fmt.Sprintf("10.244.%d.1", i+1))
	}
	link(t, tn.node, tn.outside, "eth0", nodeIP+"/24", outsideIP+"/24", nodeIP)
	// The node's own connections to ClusterIPs need a route for the Service range (DNAT
	// at output picks the endpoint afterwards).
	inNS(t, tn.node, func() error {
		_, dst, _ := net.ParseCIDR("10.96.0.0/12")
		return netlink.RouteAdd(&netlink.Route{Dst: dst, Gw: net.ParseIP(outsideIP)})
	})
	return tn
}

func podIP(i int) string { return fmt.Sprintf("10.244.%d.2", i+1) }

// serve answers every TCP connection and UDP datagram on port 8080 of the pod with its name.
func serve(t *testing.T, n ns.NetNS, name string) {
	var ln net.Listener
	var pc net.PacketConn
	inNS(t, n, func() error {
		var err error
		if ln, err = net.Listen("tcp4", ":8080"); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp4", ":8080")
		return err
	})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(name))
			_ = c.Close()
		}
	}()
	go func() {
		defer wg.Done()
		buf := make([]byte, 64)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(name), from)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		pc.Close()
		wg.Wait()
	})
}

// get connects from n to addr over network and returns what the server says.
func get(n ns.NetNS, network, addr string) (string, error) {
	var c net.Conn
	err := n.Do(func(ns.NetNS) error {
		var err error
		c, err = net.DialTimeout(network, addr, 2*time.Second)
		return err
	})
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if network == "udp4" {
		if _, err := c.Write([]byte("hi")); err != nil {
			return "", err
		}
		buf := make([]byte, 64)
		k, err := c.Read(buf)
		return string(buf[:k]), err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}

// answers dials addr tries times and counts the answers.
func answers(n ns.NetNS, network, addr string, tries int) (map[string]int, error) {
	got := map[string]int{}
	for range tries {
		s, err := get(n, network, addr)
		if err != nil {
			return got, fmt.Errorf("%s %s: %w", network, addr, err)
		}
		got[s]++
	}
	return got, nil
}

// reachesBoth checks that tries connections reach both pods and only them.
func reachesBoth(n ns.NetNS, network, addr string, tries int) error {
	got, err := answers(n, network, addr, tries)
	if err != nil {
		return err
	}
	if got["pod-a"] == 0 || got["pod-b"] == 0 || len(got) != 2 {
		return fmt.Errorf("answers %v, want both pods", got)
	}
	return nil
}

// reachesOnly checks that tries connections all reach pod.
func reachesOnly(n ns.NetNS, addr, pod string, tries int) error {
	got, err := answers(n, "tcp4", addr, tries)
	if err != nil {
		return err
	}
	if len(got) != 1 || got[pod] != tries {
		return fmt.Errorf("answers %v, want %s only", got, pod)
	}
	return nil
}

// refused checks that a connection to addr is refused.
func refused(n ns.NetNS, addr string) func() error {
	return func() error {
		_, err := get(n, "tcp4", addr)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("err = %v, want connection refused", err)
		}
		return nil
	}
}

func TestRealServiceTraffic(t *testing.T) {
	testutil.RequireRoot(t, "nft")
	tn := newTestNet(t, "pod-a", "pod-b", "client")
	serve(t, tn.pods["pod-a"], "pod-a")
	serve(t, tn.pods["pod-b"], "pod-b")
	client := tn.pods["client"]

	kube := fake.NewClientset()
	ctx := context.Background()
	svc := makeService("ns", "web", "10.96.0.50", nodePort(30080), func(s *v1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "udp", Protocol: v1.ProtocolUDP, Port: 53})
	})
	if _, err := kube.CoreV1().Services("ns").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice := makeSlice(svc, "web-1", 8080, ep{ip: podIP(0), node: testNode}, ep{ip: podIP(1), node: "node-b"})
	slice.Ports = append(slice.Ports, discovery.EndpointPort{Name: ptr.To("udp"), Protocol: ptr.To(v1.ProtocolUDP), Port: ptr.To[int32](8080)})
	if _, err := kube.DiscoveryV1().EndpointSlices("ns").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	tableName := fmt.Sprintf("kubelab-proxy-test-%d", os.Getpid())
	// A chain, map and set an earlier run left for a Service deleted since.
	stale := "service-XXXXXXXX-ns/gone/tcp/http"
	nftIn(t, tn.node, "-f", "-", "add table ip "+tableName+"\nadd chain ip "+tableName+" "+stale+
		"\nadd map ip "+tableName+" lb-"+stale+" { typeof numgen random mod 1 : verdict ; }"+
		"\nadd set ip "+tableName+" affinity-XXXXXXXX-ns/gone/tcp/http__10.244.9.9/80 { type ipv4_addr ; }\n")
	p, err := New(Config{NodeName: testNode, NodeIPs: []string{nodeIP}, ClusterCIDR: testCluster,
		NetNS: tn.node.Path(), Table: tableName, MinSyncPeriod: -1, Logger: testLogger(t)}, kube)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	stopped := false
	stopProxy := func() {
		if !stopped {
			stopped = true
			stop()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	}
	t.Cleanup(stopProxy)
	testutil.EventuallyWithin(t, 15*time.Second, "first sync", func() error {
		if !p.HasSynced() {
			return errors.New("not synced")
		}
		return nil
	})
	if out := nftIn(t, tn.node, "list", "table", "ip", tableName); strings.Contains(out, "ns/gone/") {
		t.Errorf("the first sync left objects of a Service that is gone:\n%s", out)
	}

	const cip = "10.96.0.50:80"
	t.Run("ClusterIP from a pod reaches both endpoints", func(t *testing.T) {
		if err := reachesBoth(client, "tcp4", cip, 60); err != nil {
			t.Error(err)
		}
	})
	t.Run("ClusterIP over UDP", func(t *testing.T) {
		if err := reachesBoth(client, "udp4", "10.96.0.50:53", 60); err != nil {
			t.Error(err)
		}
	})
	t.Run("ClusterIP from the node itself", func(t *testing.T) {
		if err := reachesBoth(tn.node, "tcp4", cip, 60); err != nil {
			t.Error(err)
		}
	})
	t.Run("NodePort from another host on the VPC", func(t *testing.T) {
		if err := reachesBoth(tn.outside, "tcp4", nodeIP+":30080", 60); err != nil {
			t.Error(err)
		}
	})
	t.Run("hairpin: a pod reaches itself through its Service", func(t *testing.T) {
		got, err := answers(tn.pods["pod-a"], "tcp4", cip, 60)
		if err != nil || got["pod-a"] == 0 {
			t.Errorf("answers %v, %v: pod-a never reached itself", got, err)
		}
	})
	t.Run("a port the ClusterIP does not have is refused", func(t *testing.T) {
		if err := refused(client, "10.96.0.50:81")(); err != nil {
			t.Error(err)
		}
	})

	update := func(t *testing.T, eps ...ep) {
		t.Helper()
		s := makeSlice(svc, "web-1", 8080, eps...)
		s.Ports = slice.Ports
		if _, err := kube.DiscoveryV1().EndpointSlices("ns").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	updateService := func(t *testing.T, s *v1.Service) {
		t.Helper()
		if _, err := kube.CoreV1().Services("ns").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	onlyA := func() error { return reachesOnly(client, cip, "pod-a", 20) }

	t.Run("an endpoint not ready gets no traffic", func(t *testing.T) {
		if n := udpFlows(t, tn.node, "10.96.0.50", 53, podIP(1)); n == 0 {
			t.Fatal("no UDP conntrack entry to pod-b to begin with")
		}
		update(t, ep{ip: podIP(0), node: testNode}, ep{ip: podIP(1), node: "node-b", notReady: true})
		testutil.EventuallyWithin(t, 15*time.Second, "pod-b dropped", onlyA)
		// UDP has no connection to end: the entries that send a client to pod-b go.
		testutil.EventuallyWithin(t, 15*time.Second, "UDP conntrack entries to pod-b deleted", func() error {
			if n := udpFlows(t, tn.node, "10.96.0.50", 53, podIP(1)); n > 0 {
				return fmt.Errorf("%d UDP conntrack entries to 10.96.0.50:53 answered by pod-b", n)
			}
			return nil
		})
	})

	t.Run("ClientIP affinity sticks to one endpoint", func(t *testing.T) {
		update(t, ep{ip: podIP(0), node: testNode}, ep{ip: podIP(1), node: "node-b"})
		testutil.EventuallyWithin(t, 15*time.Second, "both back", func() error { return reachesBoth(client, "tcp4", cip, 40) })
		sticky := svc.DeepCopy()
		sticky.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		updateService(t, sticky)
		testutil.EventuallyWithin(t, 15*time.Second, "sticky", func() error {
			got, err := answers(client, "tcp4", cip, 30)
			if err == nil && len(got) != 1 {
				err = fmt.Errorf("answers %v, want one pod", got)
			}
			return err
		})
		updateService(t, svc)
		testutil.EventuallyWithin(t, 15*time.Second, "not sticky any more", func() error { return reachesBoth(client, "tcp4", cip, 40) })
	})

	t.Run("externalTrafficPolicy Local sends NodePort traffic to local endpoints", func(t *testing.T) {
		local := svc.DeepCopy()
		local.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		updateService(t, local)
		testutil.EventuallyWithin(t, 15*time.Second, "NodePort to the endpoint on this node only", func() error {
			return reachesOnly(tn.outside, nodeIP+":30080", "pod-a", 20)
		})
		// Pods still reach every endpoint through the NodePort.
		if err := reachesBoth(client, "tcp4", nodeIP+":30080", 60); err != nil {
			t.Error(err)
		}
		updateService(t, svc)
		testutil.EventuallyWithin(t, 15*time.Second, "Cluster policy again", func() error { return reachesBoth(tn.outside, "tcp4", nodeIP+":30080", 40) })
	})

	t.Run("no endpoints: connections are refused", func(t *testing.T) {
		update(t, ep{ip: podIP(0), node: testNode, notReady: true}, ep{ip: podIP(1), node: "node-b", notReady: true})
		testutil.EventuallyWithin(t, 15*time.Second, "ClusterIP refused", refused(client, cip))
		testutil.EventuallyWithin(t, 15*time.Second, "NodePort refused", refused(tn.outside, nodeIP+":30080"))
		testutil.EventuallyWithin(t, 15*time.Second, "ClusterIP refused from the node", refused(tn.node, cip))
	})

	t.Run("rules stay when the proxy stops; Cleanup removes them", func(t *testing.T) {
		update(t, ep{ip: podIP(0), node: testNode})
		testutil.EventuallyWithin(t, 15*time.Second, "pod-a back", onlyA)
		stopProxy()
		if err := onlyA(); err != nil {
			t.Errorf("after the proxy stopped: %v", err)
		}
		if err := Cleanup(ctx, tn.node.Path(), tableName); err != nil {
			t.Fatal(err)
		}
		if out := nftIn(t, tn.node, "list", "tables"); strings.Contains(out, tableName) {
			t.Errorf("table left after Cleanup: %s", out)
		}
		if err := Cleanup(ctx, tn.node.Path(), tableName); err != nil {
			t.Errorf("Cleanup of a missing table: %v", err)
		}
	})
}

// udpFlows counts the UDP conntrack entries in n to ip:port answered by endpoint.
func udpFlows(t *testing.T, n ns.NetNS, ip string, port uint16, endpoint string) int {
	t.Helper()
	count := 0
	inNS(t, n, func() error {
		flows, err := netlink.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
		if err != nil {
			return err
		}
		for _, f := range flows {
			if f.Forward.Protocol == unix.IPPROTO_UDP && f.Forward.DstIP.String() == ip &&
				f.Forward.DstPort == port && f.Reverse.SrcIP.String() == endpoint {
				count++
			}
		}
		return nil
	})
	return count
}

// nftIn runs nft in n; with "-f -" the last argument is its input.
func nftIn(t *testing.T, n ns.NetNS, args ...string) string {
	t.Helper()
	var out []byte
	inNS(t, n, func() error {
		cmd := exec.Command("nft", args...)
		if len(args) > 2 && args[0] == "-f" && args[1] == "-" {
			cmd = exec.Command("nft", "-f", "-")
			cmd.Stdin = strings.NewReader(args[2])
		}
		var err error
		if out, err = cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("nft %v: %w: %s", args, err, out)
		}
		return nil
	})
	return string(out)
}
