package cloud

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/kubelab/kubelab/internal/testutil"
)

// hopNet is two network namespaces: a node's, where the metadata service listens, and a
// pod's, joined to it by a veth pair as a pod is to its node.
type hopNet struct {
	server, client ns.NetNS
}

func newHopNet(t *testing.T) *hopNet {
	n := &hopNet{server: testutil.NetNS(t), client: testutil.NetNS(t)}
	link := func(a ns.NetNS, aName, aAddr string, b ns.NetNS, bName, bAddr string) {
		t.Helper()
		ha, hb := testutil.NetlinkHandle(t, a), testutil.NetlinkHandle(t, b)
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: aName}, PeerName: bName, PeerNamespace: netlink.NsFd(int(b.Fd()))}
		if err := ha.LinkAdd(veth); err != nil {
			t.Fatalf("veth %s/%s: %v", aName, bName, err)
		}
		for _, side := range []struct {
			h          *netlink.Handle
			name, addr string
		}{{ha, aName, aAddr}, {hb, bName, bAddr}} {
			l, err := side.h.LinkByName(side.name)
			if err != nil {
				t.Fatal(err)
			}
			ip, _ := netlink.ParseAddr(side.addr)
			if err := side.h.AddrAdd(l, ip); err != nil {
				t.Fatal(err)
			}
			if err := side.h.LinkSetUp(l); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, x := range []ns.NetNS{n.server, n.client} {
		h := testutil.NetlinkHandle(t, x)
		lo, err := h.LinkByName("lo")
		if err != nil {
			t.Fatal(err)
		}
		if err := h.LinkSetUp(lo); err != nil {
			t.Fatal(err)
		}
	}
	link(n.server, "s0", "10.99.1.1/24", n.client, "c0", "10.99.1.2/24")
	return n
}

// httpIn is an HTTP client whose connections start in netns x.
func httpIn(x ns.NetNS, timeout time.Duration) *http.Client {
	dial := func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		err = x.Do(func(ns.NetNS) error {
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
}

// TestIMDSHopLimit checks HttpPutResponseHopLimit as EKS nodes rely on it: with 1, a
// pod gets no IMDSv2 token while the node itself gets one and IMDSv1 still answers the
// pod; with 2, the pod gets its token.
func TestIMDSHopLimit(t *testing.T) {
	hn := newHopNet(t)
	r := startCloud(t, Config{Hollow: true, NoIMDSListeners: true})
	launch := func(hops int32) string {
		out, err := r.ec2.RunInstances(context.Background(), &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
			MetadataOptions: &types.InstanceMetadataOptionsRequest{HttpPutResponseHopLimit: aws.Int32(hops)}})
		if err != nil {
			t.Fatal(err)
		}
		return *out.Instances[0].InstanceId
	}
	one, two := launch(1), launch(2)
	var ln net.Listener
	if err := hn.server.Do(func(ns.NetNS) (err error) {
		ln, err = net.Listen("tcp", "10.99.1.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/one/", http.StripPrefix("/one", r.IMDSHandler(one)))
	mux.Handle("/two/", http.StripPrefix("/two", r.IMDSHandler(two)))
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	base := "http://" + ln.Addr().String()
	token := func(c *http.Client, inst string) (string, error) {
		req, _ := http.NewRequest(http.MethodPut, base+"/"+inst+"/latest/api/token", nil)
		req.Header.Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", "60")
		resp, err := c.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	near, far := httpIn(hn.server, 10*time.Second), httpIn(hn.client, 10*time.Second)
	if tok, err := token(near, "one"); err != nil || tok == "" {
		t.Errorf("token for the node with hop limit 1: %q, %v", tok, err)
	}
	if tok, err := token(far, "two"); err != nil || tok == "" {
		t.Errorf("token for the pod with hop limit 2: %q, %v", tok, err)
	}
	resp, err := far.Get(base + "/one/latest/meta-data/instance-id")
	if err != nil {
		t.Fatalf("IMDSv1 from the pod: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != one {
		t.Errorf("IMDSv1 from the pod: %q", b)
	}
	// The answer to the pod's token request never arrives.
	testutil.Consistently(t, 3*time.Second, "no token for the pod with hop limit 1", func() error {
		tok, err := token(httpIn(hn.client, 2*time.Second), "one")
		if err == nil {
			return fmt.Errorf("got token %q", tok)
		}
		if !strings.Contains(err.Error(), "Timeout") && !strings.Contains(err.Error(), "deadline") {
			return fmt.Errorf("unexpected error %v", err)
		}
		return nil
	})
}

// TestSetTTL checks that a token answer's socket sends with the TTL left (what routers
// on the way count down).
func TestSetTTL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			defer c.Close()
			c.Read(make([]byte, 1))
		}
	}()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := setTTL(conn, 3); err != nil {
		t.Fatal(err)
	}
	raw, _ := conn.(*net.TCPConn).SyscallConn()
	var ttl int
	var gerr error
	raw.Control(func(fd uintptr) { ttl, gerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_TTL) })
	if gerr != nil || ttl != 3 {
		t.Errorf("IP_TTL %d (%v), want 3", ttl, gerr)
	}
}

func TestClientHops(t *testing.T) {
	for _, tc := range []struct {
		remote, local string
		want          int
	}{
		{"127.0.0.1:4000", "127.0.0.1:80", 0},
		{"169.254.169.254:4000", "169.254.169.254:80", 0},
		{"172.31.0.5:4000", "169.254.169.254:80", 0},
		{"10.244.1.7:4000", "169.254.169.254:80", 1},
	} {
		r := httptest.NewRequest(http.MethodPut, "/latest/api/token", nil)
		r.RemoteAddr = tc.remote
		la, _ := net.ResolveTCPAddr("tcp", tc.local)
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, la))
		if got := clientHops(r, "172.31.0.5"); got != tc.want {
			t.Errorf("clientHops(%s -> %s) = %d, want %d", tc.remote, tc.local, got, tc.want)
		}
	}
}
