package testutil

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	"github.com/vishvananda/netlink"

	"github.com/kubelab/kubelab/internal/util/netns"
)

// Internet is the outside world of a test: a network namespace of its own whose loopback
// holds the addresses the test serves "outside" services on (documentation addresses,
// such as 198.51.100.7), so that a test of traffic leaving a cluster never sends a packet
// off the machine. Dial connects inside it, as kubelab's egress dialer connects from the
// machine's namespace.
type Internet struct {
	t    testing.TB
	path string
}

// NewInternet makes the namespace, with addrs (IPv4, each a /32) on its loopback; it is
// removed when t ends. It skips t unless root runs it (RequireRoot).
func NewInternet(t testing.TB, addrs ...string) *Internet {
	t.Helper()
	n := NetNS(t)
	h := NetlinkHandle(t, n)
	lo, err := h.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		addr, err := netlink.ParseAddr(a + "/32")
		if err != nil {
			t.Fatal(err)
		}
		if err := h.AddrAdd(lo, addr); err != nil {
			t.Fatalf("add %s to the internet's loopback: %v", a, err)
		}
	}
	if err := h.LinkSetUp(lo); err != nil {
		t.Fatal(err)
	}
	return &Internet{t: t, path: n.Path()}
}

// Path is the namespace's file.
func (i *Internet) Path() string { return i.path }

// Dial connects to addr inside the namespace.
func (i *Internet) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := netns.Do(i.path, func() (err error) {
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Listen opens a listener inside the namespace, closed when the test ends.
func (i *Internet) Listen(network, addr string) net.Listener {
	i.t.Helper()
	var l net.Listener
	if err := netns.Do(i.path, func() (err error) { l, err = net.Listen(network, addr); return err }); err != nil {
		i.t.Fatalf("listen %s in the internet: %v", addr, err)
	}
	i.t.Cleanup(func() { l.Close() })
	return l
}

// ServeHTTP serves h at addr ("198.51.100.7:80") inside the namespace until the test ends.
func (i *Internet) ServeHTTP(addr string, h http.Handler) {
	i.t.Helper()
	l := i.Listen("tcp", addr)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	i.t.Cleanup(func() { srv.Close() })
}

// ServeDNS answers A queries at addr ("198.51.100.53:53", UDP and TCP) inside the
// namespace from records (a name, any case and with or without the final dot → an IPv4
// address) until the test ends: NXDOMAIN for other names, NODATA for other types of them.
func (i *Internet) ServeDNS(addr string, records map[string]string) {
	i.t.Helper()
	zone := map[string]net.IP{}
	for name, ip := range records {
		zone[strings.ToLower(mdns.Fqdn(name))] = net.ParseIP(ip)
	}
	h := mdns.HandlerFunc(func(w mdns.ResponseWriter, req *mdns.Msg) {
		m := new(mdns.Msg)
		m.SetReply(req)
		if len(req.Question) == 1 {
			q := req.Question[0]
			ip, ok := zone[strings.ToLower(q.Name)]
			switch {
			case !ok:
				m.Rcode = mdns.RcodeNameError
			case q.Qtype == mdns.TypeA:
				m.Answer = append(m.Answer, &mdns.A{Hdr: mdns.RR_Header{Name: q.Name, Rrtype: mdns.TypeA, Class: mdns.ClassINET, Ttl: 60}, A: ip})
			}
		}
		_ = w.WriteMsg(m)
	})
	l := i.Listen("tcp", addr)
	var pc net.PacketConn
	if err := netns.Do(i.path, func() (err error) { pc, err = net.ListenPacket("udp", addr); return err }); err != nil {
		i.t.Fatalf("listen udp %s in the internet: %v", addr, err)
	}
	i.t.Cleanup(func() { pc.Close() })
	for _, srv := range []*mdns.Server{{Listener: l, Handler: h}, {PacketConn: pc, Handler: h}} {
		go srv.ActivateAndServe()
		i.t.Cleanup(func() { _ = srv.Shutdown() })
	}
}
