package natgateway_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/kubelab/kubelab/internal/natgateway"
	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/util/netns"
)

// vpc is a VPC as kubelab's: a router namespace with the bridge vpc0 at 172.31.0.1/16,
// and a node namespace whose eth0 on it has 172.31.0.11/16 and a default route via the
// router.
type vpc struct {
	router, node ns.NetNS
}

func newVPC(t *testing.T) vpc {
	t.Helper()
	v := vpc{router: testutil.NetNS(t, "nft"), node: testutil.NetNS(t)}
	rh, nh := testutil.NetlinkHandle(t, v.router), testutil.NetlinkHandle(t, v.node)
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	la := netlink.NewLinkAttrs()
	la.Name = "vpc0"
	must("add vpc0", rh.LinkAdd(&netlink.Bridge{LinkAttrs: la}))
	br, err := rh.LinkByName("vpc0")
	must("vpc0", err)
	addr, _ := netlink.ParseAddr("172.31.0.1/16")
	must("address the router", rh.AddrAdd(br, addr))
	must("vpc0 up", rh.LinkSetUp(br))
	la = netlink.NewLinkAttrs()
	la.Name, la.MasterIndex = "vn0", br.Attrs().Index
	must("add the node's port", rh.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(v.node.Fd()))}))
	port, err := rh.LinkByName("vn0")
	must("vn0", err)
	must("vn0 up", rh.LinkSetUp(port))
	eth, err := nh.LinkByName("eth0")
	must("eth0", err)
	addr, _ = netlink.ParseAddr("172.31.0.11/16")
	must("address the node", nh.AddrAdd(eth, addr))
	must("eth0 up", nh.LinkSetUp(eth))
	must("default route", nh.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: net.ParseIP("172.31.0.1")}))
	return v
}

// dialFrom connects to addr from inside the namespace at path.
func dialFrom(path, addr string) (net.Conn, error) {
	var c net.Conn
	err := netns.Do(path, func() (err error) {
		c, err = (&net.Dialer{Timeout: 10 * time.Second}).Dial("tcp", addr)
		return err
	})
	return c, err
}

var clusterRanges = []netip.Prefix{
	netip.MustParsePrefix("172.31.0.0/16"), netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.96.0.0/12"),
}

// A node of the VPC reaches the test's internet through the gateway: an HTTP page, a
// stream whose end is passed on; a destination that refuses, and a connection to the
// gateway's own listener, are reset at once. When the gateway ends, its rules go.
func TestGateway(t *testing.T) {
	v := newVPC(t)
	internet := testutil.NewInternet(t, "198.51.100.7", "198.51.100.8")
	internet.ServeHTTP("198.51.100.7:80", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from outside")
	}))
	echo := internet.Listen("tcp", "198.51.100.7:7")
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { // echoes until the end of the stream, then ends its own
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	var mu sync.Mutex
	var dialed []string
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, network+" "+addr)
		mu.Unlock()
		return internet.Dial(ctx, network, addr)
	}
	g, err := natgateway.New(natgateway.Config{NetNS: v.router.Path(), ClusterRanges: clusterRanges, Dial: dial,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	var l net.Listener
	if err := netns.Do(v.router.Path(), func() (err error) { l, err = net.Listen("tcp", "172.31.0.1:0"); return err }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- g.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		<-served
	})
	hasTable := func() bool {
		var out []byte
		_ = netns.Do(v.router.Path(), func() (err error) { out, err = exec.Command("nft", "list", "tables").Output(); return err })
		return strings.Contains(string(out), natgateway.TableName)
	}
	testutil.Eventually(t, "the gateway's rules in the router's namespace", hasTable)

	// HTTP, as a node's curl would.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return dialFrom(v.node.Path(), addr) }}}
	resp, err := client.Get("http://198.51.100.7/")
	if err != nil {
		t.Fatalf("GET http://198.51.100.7/ from the node: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "hello from outside" {
		t.Errorf("GET http://198.51.100.7/ from the node: %v %q", err, body)
	}

	// The end of the node's stream reaches the server, whose answer and end come back.
	c, err := dialFrom(v.node.Path(), "198.51.100.7:7")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, err := io.ReadAll(c); err != nil || string(got) != "ping" {
		t.Errorf("echo through the gateway after a half-close: %v %q", err, got)
	}
	c.Close()

	// What the gateway cannot carry is reset: a destination that refuses, the listener.
	// The reset may come before the node's connect returns (the router's kernel answered
	// the handshake, and the gateway is quick to refuse) or on its first read.
	for _, addr := range []string{"198.51.100.8:80", l.Addr().String()} {
		c, err := dialFrom(v.node.Path(), addr)
		if err == nil {
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = c.Read(make([]byte, 1))
			c.Close()
		}
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("%s from the node through the gateway: %v, want a reset", addr, err)
		}
	}
	mu.Lock()
	want := []string{"tcp 198.51.100.7:80", "tcp 198.51.100.7:7", "tcp 198.51.100.8:80"}
	if strings.Join(dialed, ",") != strings.Join(want, ",") {
		t.Errorf("the gateway dialed %q, want %q", dialed, want)
	}
	mu.Unlock()

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not return after its context ended")
	}
	served <- nil
	if hasTable() {
		t.Error("the gateway's table is left in the router's namespace after it ended")
	}
	if out, err := exec.Command("nft", "list", "tables").Output(); err != nil || strings.Contains(string(out), natgateway.TableName) {
		t.Errorf("the host's nftables: %v\n%s", err, out)
	}
}

// Cleanup removes a table a gateway left (kubelab killed), and is no error without one.
func TestCleanup(t *testing.T) {
	n := testutil.NetNS(t, "nft")
	ctx := context.Background()
	if err := netns.Do(n.Path(), func() error {
		return exec.Command("nft", "add table ip "+natgateway.TableName).Run()
	}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := natgateway.Cleanup(ctx, n.Path()); err != nil {
			t.Fatal(err)
		}
	}
	var out []byte
	_ = netns.Do(n.Path(), func() (err error) { out, err = exec.Command("nft", "list", "tables").Output(); return err })
	if strings.Contains(string(out), natgateway.TableName) {
		t.Errorf("table left after Cleanup:\n%s", out)
	}
}
