package cluster_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/kubelab/kubelab/internal/natgateway"
	"github.com/kubelab/kubelab/internal/testutil"
)

// The test's own outside world: a page at internetWeb:80, named internetName by the
// nameserver at internetDNS.
const (
	internetWeb  = "198.51.100.7"
	internetDNS  = "198.51.100.53:53"
	internetName = "www.example.test"
	internetPage = "hello from the internet"
)

// internet is testutil's stand-in internet with the page and the name, whose dialer,
// the cluster's EgressDial, remembers what it dialed.
type internet struct {
	t *testing.T
	*testutil.Internet
	mu     sync.Mutex
	dialed []string
}

func newInternet(t *testing.T) *internet {
	t.Helper()
	i := &internet{t: t, Internet: testutil.NewInternet(t, internetWeb, strings.Split(internetDNS, ":")[0])}
	i.ServeHTTP(internetWeb+":80", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, internetPage) }))
	i.ServeDNS(internetDNS, map[string]string{internetName: internetWeb})
	return i
}

func (i *internet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	i.mu.Lock()
	if !slices.Contains(i.dialed, network+" "+addr) {
		i.dialed = append(i.dialed, network+" "+addr)
	}
	i.mu.Unlock()
	return i.Dial(ctx, network, addr)
}

// assertDialed checks that the cluster dialed into the internet exactly the "<network>
// <addr>" of want (in any order, each any number of times).
func (i *internet) assertDialed(want ...string) {
	i.t.Helper()
	i.mu.Lock()
	defer i.mu.Unlock()
	got := slices.Sorted(slices.Values(i.dialed))
	if slices.Sort(want); !slices.Equal(got, want) {
		i.t.Errorf("the cluster dialed into the internet %q, want %q", got, want)
	}
}

// hostForwarding is the machine's IPv4 forwarding sysctl.
func hostForwarding(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// assertHostUntouched checks that the machine's namespace has no route into the cluster's
// ranges, no table of the NAT gateway, and IPv4 forwarding as it was (forwarding).
func assertHostUntouched(t *testing.T, forwarding string) {
	t.Helper()
	routes, err := netlink.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		if r.Dst == nil {
			continue
		}
		dst, _ := netip.AddrFromSlice(r.Dst.IP)
		for _, cluster := range []string{"172.31.0.0/16", "10.244.0.0/16", "10.96.0.0/12"} {
			if netip.MustParsePrefix(cluster).Contains(dst.Unmap()) {
				t.Errorf("the machine's namespace has a route into %s: %s", cluster, r)
			}
		}
	}
	if out, err := exec.Command("nft", "list", "tables").Output(); err != nil || strings.Contains(string(out), natgateway.TableName) {
		t.Errorf("the machine's nftables (%v):\n%s", err, out)
	}
	if got := hostForwarding(t); got != forwarding {
		t.Errorf("the machine's net.ipv4.ip_forward is %s, was %s", got, forwarding)
	}
}

// vpcTables lists the nftables tables in the cluster's VPC namespace.
func vpcTables(t *testing.T, tc *testCluster) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", tc.VPC().Name(), "nft", "list", "tables").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list tables in the VPC: %v\n%s", err, out)
	}
	return string(out)
}
