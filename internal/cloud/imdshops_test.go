package cloud

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/kubelab/kubelab/internal/testutil"
)

// hopNet is three network namespaces in a line: the IMDS server's, a router's and a
// client's, so that the client is one routing hop from the server (as a pod is from
// its node's metadata service).
type hopNet struct {
	server, router, client ns.NetNS
}

func newHopNet(t *testing.T) *hopNet {
	n := &hopNet{server: testutil.NetNS(t), router: testutil.NetNS(t), client: testutil.NetNS(t)}
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
	for _, x := range []ns.NetNS{n.server, n.router, n.client} {
		h := testutil.NetlinkHandle(t, x)
		lo, err := h.LinkByName("lo")
		if err != nil {
			t.Fatal(err)
		}
		if err := h.LinkSetUp(lo); err != nil {
			t.Fatal(err)
		}
	}
	link(n.server, "s0", "10.99.1.1/24", n.router, "r0", "10.99.1.2/24")
	link(n.client, "c0", "10.99.2.1/24", n.router, "r1", "10.99.2.2/24")
	route := func(x ns.NetNS, gw string) {
		t.Helper()
		if err := testutil.NetlinkHandle(t, x).RouteAdd(&netlink.Route{Gw: net.ParseIP(gw)}); err != nil {
			t.Fatalf("default route via %s: %v", gw, err)
		}
	}
	route(n.server, "10.99.1.2")
	route(n.client, "10.99.2.2")
	if err := n.router.Do(func(ns.NetNS) error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
	}); err != nil {
		t.Fatalf("forwarding in the router: %v", err)
	}
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

// TestIMDSHopLimit checks HttpPutResponseHopLimit on the wire: with 1, a client one
// routing hop away gets no IMDSv2 token (its response dies at the router) while the
// server's own namespace gets one and IMDSv1 still answers the far client; with 2, the
// far client gets its token.
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
		t.Errorf("token in the server's namespace with hop limit 1: %q, %v", tok, err)
	}
	if tok, err := token(far, "two"); err != nil || tok == "" {
		t.Errorf("token one hop away with hop limit 2: %q, %v", tok, err)
	}
	resp, err := far.Get(base + "/one/latest/meta-data/instance-id")
	if err != nil {
		t.Fatalf("IMDSv1 one hop away: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != one {
		t.Errorf("IMDSv1 one hop away: %q", b)
	}
	// The response to the far PUT never arrives: its packets leave with TTL 1.
	testutil.Consistently(t, 3*time.Second, "no token one hop away with hop limit 1", func() error {
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
