package vpc

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/util/netns"
)

func newTestVPC(t *testing.T) *VPC {
	t.Helper()
	testutil.RequireRoot(t)
	v, err := New(Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := v.Remove(); err != nil {
			t.Error(err)
		}
	})
	if err := v.Ensure(); err != nil {
		t.Fatal(err)
	}
	return v
}

// echoIn serves one line back with a prefix on addr inside the namespace at path.
func echoIn(t *testing.T, path, addr, prefix string) string {
	t.Helper()
	l, err := Listen(path, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			_, _ = c.Write([]byte(prefix + line))
			c.Close()
		}
	}()
	return l.Addr().String()
}

// dialFrom sends a line to addr from inside the namespace at path and returns the answer.
func dialFrom(t *testing.T, path, addr string) (string, error) {
	t.Helper()
	var c net.Conn
	err := netns.Do(path, func() (err error) {
		c, err = net.DialTimeout("tcp", addr, 5*time.Second)
		return err
	})
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("hi\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

func TestNodesReachEachOtherAndTheControlPlane(t *testing.T) {
	v := newTestVPC(t)
	a, err := v.EnsureNode(Node{Name: "ip-172-31-0-11.ec2.internal", IP: "172.31.0.11", MAC: "02:00:00:00:00:0b"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := v.EnsureNode(Node{Name: "ip-172-31-16-11.ec2.internal", IP: "172.31.16.11"})
	if err != nil {
		t.Fatal(err)
	}
	toA := echoIn(t, a, "172.31.0.11:8080", "a:")
	if got, err := dialFrom(t, b, toA); err != nil || got != "a:hi" {
		t.Fatalf("node b → node a: %q, %v", got, err)
	}
	cp := echoIn(t, v.Path(), ControlPlaneIP+":443", "cp:")
	if got, err := dialFrom(t, a, cp); err != nil || got != "cp:hi" {
		t.Fatalf("node a → control plane: %q, %v", got, err)
	}
	md := echoIn(t, a, MetadataIP+":80", "imds:")
	if got, err := dialFrom(t, a, md); err != nil || got != "imds:hi" {
		t.Fatalf("node a → its metadata address: %q, %v", got, err)
	}
	// The metadata address is each node's own: b's is not a's.
	if got, err := dialFrom(t, b, md); err == nil {
		t.Fatalf("node b reached node a's metadata listener: %q", got)
	}
	var mac string
	_ = withHandle(a, func(h *netlink.Handle) error {
		l, err := h.LinkByName(NodeInterface)
		if err == nil {
			mac = l.Attrs().HardwareAddr.String()
		}
		return err
	})
	if mac != "02:00:00:00:00:0b" {
		t.Errorf("eth0 of node a has MAC %q, want the instance's 02:00:00:00:00:0b", mac)
	}
	err = netns.Do(a, func() error {
		for _, k := range []string{"net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables"} {
			b, err := os.ReadFile(filepath.Join("/proc/sys", k))
			if err != nil || strings.TrimSpace(string(b)) != "1" {
				t.Errorf("%s in node a = %q, %v; want 1", k, b, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestEnsureIsIdempotentAndRemoveLeavesNothing(t *testing.T) {
	v := newTestVPC(t)
	n := Node{Name: "ip-172-31-0-12.ec2.internal", IP: "172.31.0.12"}
	path, err := v.EnsureNode(n)
	if err != nil {
		t.Fatal(err)
	}
	to := echoIn(t, path, "172.31.0.12:8080", "n:")
	// A second start finds everything and keeps it: the listener made before still answers.
	if err := v.Ensure(); err != nil {
		t.Fatal(err)
	}
	if _, err := v.EnsureNode(n); err != nil {
		t.Fatal(err)
	}
	if got, err := dialFrom(t, v.Path(), to); err != nil || got != "n:hi" {
		t.Fatalf("after a second Ensure: %q, %v", got, err)
	}
	if got := len(Namespaces(v.cfg.DataDir)); got != 2 {
		t.Fatalf("%d namespaces, want the VPC's and the node's", got)
	}
	if err := v.Remove(); err != nil {
		t.Fatal(err)
	}
	if left := Namespaces(v.cfg.DataDir); len(left) != 0 {
		t.Fatalf("left after Remove: %v", left)
	}
}

func TestBadNodeAddress(t *testing.T) {
	v := newTestVPC(t)
	for _, ip := range []string{"", "10.0.0.1", "nope"} {
		if _, err := v.EnsureNode(Node{Name: "n", IP: ip}); err == nil || !strings.Contains(err.Error(), "172.31.0.0/16") {
			t.Errorf("EnsureNode with IP %q: %v; want an error naming the VPC's range", ip, err)
		}
	}
	if left := Namespaces(v.cfg.DataDir); len(left) != 1 {
		t.Errorf("namespaces after refused nodes: %v; want only the VPC's", left)
	}
}

// A port with a MAC lower than the bridge's does not change vpc0's MAC, and so does not
// flush the permanent neighbour entries the fabric keeps on it.
func TestBridgeKeepsItsMAC(t *testing.T) {
	v := newTestVPC(t)
	err := withHandle(v.Path(), func(h *netlink.Handle) error {
		br, err := h.LinkByName(Bridge)
		if err != nil {
			return err
		}
		if got := br.Attrs().HardwareAddr.String(); got != v.bridgeMAC().String() {
			t.Errorf("vpc0 MAC %s, want %s", got, v.bridgeMAC())
		}
		entry := &netlink.Neigh{LinkIndex: br.Attrs().Index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
			IP: net.ParseIP("172.31.9.9"), HardwareAddr: net.HardwareAddr{0x0e, 0, 0, 0, 0x09, 0x09}}
		if err := h.NeighSet(entry); err != nil {
			return err
		}
		attrs := netlink.NewLinkAttrs()
		attrs.Name, attrs.HardwareAddr, attrs.MasterIndex = "lowmac0", net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}, br.Attrs().Index
		if err := h.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: "lowmac1"}); err != nil {
			return err
		}
		port, err := h.LinkByName("lowmac0")
		if err != nil {
			return err
		}
		if err := h.LinkSetUp(port); err != nil {
			return err
		}
		if br, err = h.LinkByName(Bridge); err != nil {
			return err
		}
		if got := br.Attrs().HardwareAddr.String(); got != v.bridgeMAC().String() {
			t.Errorf("vpc0 MAC %s after a port with a lower MAC joined, want %s", got, v.bridgeMAC())
		}
		list, err := h.NeighList(br.Attrs().Index, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		for _, n := range list {
			if n.IP.Equal(entry.IP) && n.State&netlink.NUD_PERMANENT != 0 {
				return nil
			}
		}
		t.Errorf("the permanent neighbour entry of %s is gone from vpc0: %v", entry.IP, list)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
