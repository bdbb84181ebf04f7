package overlaytest

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/kubelab/kubelab/internal/testutil"
)

func newNS(t *testing.T) (ns.NetNS, *netlink.Handle) {
	t.Helper()
	n := testutil.NetNS(t)
	return n, testutil.NetlinkHandle(t, n)
}

func TestCapture(t *testing.T) {
	testutil.RequireRoot(t)
	a, ha := newNS(t)
	b, hb := newNS(t)
	la := netlink.NewLinkAttrs()
	la.Name = "eth0"
	if err := ha.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(b.Fd()))}); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		h    *netlink.Handle
		addr string
	}{{ha, "192.0.2.1/24"}, {hb, "192.0.2.2/24"}} {
		l, err := x.h.LinkByName("eth0")
		if err != nil {
			t.Fatal(err)
		}
		addr, _ := netlink.ParseAddr(x.addr)
		if err := x.h.AddrAdd(l, addr); err != nil {
			t.Fatal(err)
		}
		if err := x.h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := Capture(a.Path(), "eth7"); err == nil || !strings.Contains(err.Error(), "eth7") {
		t.Errorf("capture on a missing interface: %v", err)
	}
	c, err := Capture(a.Path(), "eth0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// A server in b, a datagram from a: sent until seen, since the first may
	// wait for ARP.
	var srv net.PacketConn
	if err := b.Do(func(ns.NetNS) error {
		var err error
		srv, err = net.ListenPacket("udp4", "192.0.2.2:9999")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var cl net.Conn
	if err := a.Do(func(ns.NetNS) error {
		var err error
		cl, err = net.Dial("udp4", "192.0.2.2:9999")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			cl.Write([]byte("hello"))
			time.Sleep(50 * time.Millisecond)
		}
	}()
	p, err := c.WaitFor(ctx, func(p Packet) bool { return p.Proto == ProtoUDP && p.DstPort == 9999 })
	if err != nil {
		t.Fatal(err)
	}
	if p.Src.String() != "192.0.2.1" || p.Dst.String() != "192.0.2.2" || !p.Outgoing || p.VXLAN {
		t.Errorf("captured %s outgoing=%v", p, p.Outgoing)
	}
	if err := c.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if len(c.Packets()) == 0 {
		t.Error("packets gone after close")
	}
	if _, err := c.WaitFor(context.Background(), func(Packet) bool { return false }); err == nil {
		t.Error("WaitFor on a closed capture with no match returned no error")
	}
}
