package plugin

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/vishvananda/netlink"
	"sigs.k8s.io/knftables"
)

// nodeWithAddress gives the node's namespace lo up, an "eth0" with nodeIP, IPv4
// forwarding and bridged traffic through netfilter, as kubelab's real nodes have.
func nodeWithAddress(t *testing.T, subnet, nodeIP string) *node {
	n := newNode(t, subnet)
	err := n.ns.Do(func(ns.NetNS) error {
		eth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "vpc0"}
		if err := netlink.LinkAdd(eth); err != nil {
			return err
		}
		for _, name := range []string{"lo", "eth0", "vpc0"} {
			l, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetUp(l); err != nil {
				return err
			}
		}
		addr, err := netlink.ParseAddr(nodeIP + "/24")
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(eth, addr); err != nil {
			return err
		}
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile("/proc/sys/net/bridge/bridge-nf-call-iptables", []byte("1"), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// hostPortState lists, inside the node, the hostPort map's elements and the table's chains.
func hostPortState(t *testing.T, n *node) (elements []string, chains []string) {
	t.Helper()
	err := n.ns.Do(func(ns.NetNS) error {
		nft, err := knftables.New(knftables.IPv4Family, HostPortTable)
		if err != nil {
			return err
		}
		els, err := listHostPortElements(context.Background(), nft)
		if err != nil {
			return err
		}
		for _, e := range els {
			elements = append(elements, strings.Join(e.Key, " . ")+" : "+strings.Join(e.Value, " "))
		}
		chains, err = nft.List(context.Background(), "chains")
		if knftables.IsNotFound(err) {
			err = nil
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return elements, chains
}

func TestHostPortDNAT(t *testing.T) {
	const nodeIP = "172.31.250.2"
	n := nodeWithAddress(t, "10.244.20.0/24", nodeIP)
	withPorts := n.conf(map[string]any{
		"capabilities":  map[string]bool{"portMappings": true},
		"runtimeConfig": map[string]any{"portMappings": []map[string]any{{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}}},
	})
	pod1, pod2 := testutil.NetNS(t), testutil.NetNS(t)
	r1, err := n.add("c1", pod1, withPorts)
	if err != nil {
		t.Fatalf("ADD with hostPort: %v", err)
	}
	pod1IP := r1.IPs[0].Address.IP.String()
	n.mustAdd("c2", pod2)
	serve(t, pod1, pod1IP+":80", "pod1")
	chain := hostPortChain("c1", "eth0")

	elements, _ := hostPortState(t, n)
	if len(elements) != 1 || elements[0] != "tcp . 8080 : goto "+chain {
		t.Fatalf("hostport map %v", elements)
	}
	// From the node itself, to its own address.
	if got, err := dial(n.ns, nodeIP+":8080"); err != nil || !strings.HasPrefix(got, "pod1 "+nodeIP+":") {
		t.Fatalf("node → %s:8080: %q %v", nodeIP, got, err)
	}
	// From another pod of the node, through the node's address.
	if got, err := dial(pod2, nodeIP+":8080"); err != nil || !strings.HasPrefix(got, "pod1 ") {
		t.Fatalf("pod2 → %s:8080: %q %v", nodeIP, got, err)
	}
	// From the pod to its own hostPort: masqueraded to the gateway so the answer returns.
	if got, err := dial(pod1, nodeIP+":8080"); err != nil || !strings.HasPrefix(got, "pod1 10.244.20.1:") {
		t.Fatalf("pod1 → its own hostPort: %q %v", got, err)
	}

	// Another pod asking for the same hostPort is refused and leaves nothing.
	pod3 := testutil.NetNS(t)
	_, err = n.add("c3", pod3, withPorts)
	wantCode(t, err, CodeHostPort, "hostPort 8080/tcp already used by another pod on this node")
	if l := linkIn(t, n.ns, HostVethName("c3", "eth0")); l != nil {
		t.Fatal("veth of the refused pod left behind")
	}
	if files := n.ipamFiles(); len(files) != 2 {
		t.Fatalf("ipam files %v, want c1's and c2's", files)
	}
	if got, err := dial(n.ns, nodeIP+":8080"); err != nil || !strings.HasPrefix(got, "pod1 ") {
		t.Fatalf("pod1's hostPort after the refused ADD: %q %v", got, err)
	}

	// DEL removes exactly pod1's rules.
	if err := n.del("c1", pod1, withPorts); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	elements, chains := hostPortState(t, n)
	if len(elements) != 0 {
		t.Fatalf("map elements after DEL: %v", elements)
	}
	for _, c := range chains {
		if strings.HasPrefix(c, "hostport-") {
			t.Fatalf("chain %s left after DEL (chains %v)", c, chains)
		}
	}
	// Nothing listens on the node's 8080: the connection is refused, not DNATed.
	if _, err := dial(n.ns, nodeIP+":8080"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("node → %s:8080 after DEL: %v, want connection refused", nodeIP, err)
	}
	// DEL again, and DEL of a pod without hostPorts, leave the table alone.
	if err := n.del("c1", pod1, withPorts); err != nil {
		t.Fatalf("second DEL: %v", err)
	}
	if err := n.del("c2", pod2, n.conf(nil)); err != nil {
		t.Fatalf("DEL c2: %v", err)
	}

	// The same hostPort on two addresses (one a loopback one) and with another protocol:
	// three pods hold it, each reached at its own; on every address it is taken.
	mapping := func(ip, protocol string) []byte {
		return n.conf(map[string]any{"runtimeConfig": map[string]any{"portMappings": []map[string]any{
			{"hostPort": 9090, "containerPort": 80, "protocol": protocol, "hostIP": ip}}}})
	}
	for _, p := range []struct{ id, ip, protocol string }{{"c4", "127.0.0.1", "tcp"}, {"c5", nodeIP, "tcp"}, {"c6", nodeIP, "udp"}} {
		pod := testutil.NetNS(t)
		r, err := n.add(p.id, pod, mapping(p.ip, p.protocol))
		if err != nil {
			t.Fatalf("ADD %s with hostPort 9090/%s on %s: %v", p.id, p.protocol, p.ip, err)
		}
		if p.protocol == "tcp" {
			serve(t, pod, r.IPs[0].Address.IP.String()+":80", p.id)
		}
	}
	elements, _ = hostPortState(t, n)
	if len(elements) != 3 {
		t.Fatalf("hostport maps %v, want c4's, c5's and c6's", elements)
	}
	// From the node, bound to its address as a client on a host-network pod would be.
	if got, err := dialFrom(n.ns, nodeIP, "127.0.0.1:9090"); err != nil || !strings.HasPrefix(got, "c4 ") {
		t.Fatalf("node → 127.0.0.1:9090: %q %v", got, err)
	}
	if got, err := dial(n.ns, nodeIP+":9090"); err != nil || !strings.HasPrefix(got, "c5 ") {
		t.Fatalf("node → %s:9090: %q %v", nodeIP, got, err)
	}
	_, err = n.add("c7", testutil.NetNS(t), mapping("", "tcp"))
	wantCode(t, err, CodeHostPort, "hostPort 9090/tcp already used by another pod on this node")
	_, err = n.add("c8", testutil.NetNS(t), mapping(nodeIP, "udp"))
	wantCode(t, err, CodeHostPort, "hostPort "+nodeIP+":9090/udp already used by another pod on this node")
}

// dialFrom connects from local (an address of in) to addr inside in and returns what the
// server said.
func dialFrom(in ns.NetNS, local, addr string) (string, error) {
	var c net.Conn
	if err := in.Do(func(ns.NetNS) error {
		d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		var err error
		c, err = d.Dial("tcp4", addr)
		return err
	}); err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	return string(b), err
}

func TestHostPortsGC(t *testing.T) {
	n := nodeWithAddress(t, "10.244.21.0/24", "172.31.250.3")
	n.version = "1.1.0"
	withPorts := func(port int) []byte {
		return n.conf(map[string]any{"runtimeConfig": map[string]any{"portMappings": []map[string]any{{"hostPort": port, "containerPort": 80}}}})
	}
	if _, err := n.add("keep", testutil.NetNS(t), withPorts(8081)); err != nil {
		t.Fatal(err)
	}
	if _, err := n.add("stale", testutil.NetNS(t), withPorts(8082)); err != nil {
		t.Fatal(err)
	}
	conf := n.conf(map[string]any{"cni.dev/valid-attachments": []map[string]string{{"containerID": "keep", "ifname": "eth0"}}})
	if _, err := n.call(func(p *Plugin) func(*skel.CmdArgs) error { return p.GC }, &skel.CmdArgs{StdinData: conf}); err != nil {
		t.Fatalf("GC: %v", err)
	}
	elements, _ := hostPortState(t, n)
	if len(elements) != 1 || elements[0] != "tcp . 8081 : goto "+hostPortChain("keep", "eth0") {
		t.Fatalf("hostport map after GC %v, want only keep's 8081", elements)
	}
}
