package plugin

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/kubelab/kubelab/internal/ipamd"
	"github.com/kubelab/kubelab/internal/ipamd/ipamdtest"
	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/util/netns"
)

func TestLoadNetConfVPC(t *testing.T) {
	c, err := LoadNetConf([]byte(`{"cniVersion":"1.0.0","name":"kubelab","type":"kubelab-cni","mode":"vpc","ipamdSocket":"/run/n1/ipamd.sock","dataDir":"/d"}`))
	if err != nil || !c.vpc() || c.MTU != DefaultVPCMTU {
		t.Fatalf("vpc conf: %+v, %v; want vpc mode with MTU %d", c, err, DefaultVPCMTU)
	}
	for _, tc := range []struct{ conf, want string }{
		{`{"mode":"vpc","dataDir":"/d"}`, "ipamdSocket is required"},
		{`{"mode":"vpc","ipamdSocket":"ipamd.sock","dataDir":"/d"}`, "must be an absolute path"},
		{`{"mode":"vpc","ipamdSocket":"/s","subnet":"10.244.1.0/24","dataDir":"/d"}`, "subnet is not used in vpc mode"},
		{`{"mode":"calico","subnet":"10.244.1.0/24","dataDir":"/d"}`, `mode "calico"`},
	} {
		_, err := LoadNetConf([]byte(tc.conf))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.conf, err, tc.want)
		}
	}
	if a := VPCHostVethName("0123456789abcdef", "eth0"); len(a) != 11 || !isVPCHostVethName(a) || isHostVethName(a) {
		t.Errorf("vpc veth name %q: want eni and 8 hex digits", a)
	}
}

// vpcNode is a test's node in VPC mode: a namespace with eth0 as the primary ENI, the
// IP address manager over a fake EC2, and the plugin's configuration.
type vpcNode struct {
	*node
	fake   *ipamdtest.EC2
	socket string
}

func newVPCNode(t testing.TB) *vpcNode {
	return newVPCNodeOf(t, 3, 4, ipamd.Targets{}) // t3.small: three ENIs of 3 pod addresses
}

// newVPCNodeOf is a node of an instance type with maxENIs ENIs of ipv4PerENI addresses,
// its warm pool kept to targets.
func newVPCNodeOf(t testing.TB, maxENIs, ipv4PerENI int, targets ipamd.Targets) *vpcNode {
	t.Helper()
	n := newNode(t, "")
	fake := ipamdtest.New(maxENIs, ipv4PerENI)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	m, err := runVPCNode(ctx, n.ns, fake, filepath.Join(t.TempDir(), "aws-node"), targets, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	testutil.Start(t, "ipamd", testutil.DefaultTimeout, m.Run, testutil.Closed(m.Started()))
	testutil.Eventually(t, "the primary ENI's addresses", func() bool { return len(fake.Assigned()) == ipv4PerENI-1 })
	return &vpcNode{node: n, fake: fake, socket: m.SocketPath()}
}

// runVPCNode makes node's eth0 the fake's primary ENI, keeps links ethN for the fake's
// other ENIs while they are attached (as the VPC does) until ctx ends, and returns the
// node's IP address manager in dir, not started.
func runVPCNode(ctx context.Context, node ns.NetNS, fake *ipamdtest.EC2, dir string, targets ipamd.Targets, logger *slog.Logger) (*ipamd.Manager, error) {
	h, err := netns.Handle(node.Path())
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	made := map[string]string{} // ENI id → interface name
	mirror := func() error {
		fake.Lock()
		attached := map[string]ipamdtest.ENI{}
		for _, e := range fake.ENIs {
			if e.Attached {
				attached[e.ID] = *e
			}
		}
		fake.Unlock()
		mu.Lock()
		defer mu.Unlock()
		for id, name := range made {
			if _, ok := attached[id]; !ok {
				if l, err := h.LinkByName(name); err == nil {
					if err := h.LinkDel(l); err != nil {
						return err
					}
				}
				delete(made, id)
			}
		}
		for _, e := range attached {
			if made[e.ID] != "" {
				continue
			}
			mac, _ := net.ParseMAC(e.MAC)
			attrs := netlink.NewLinkAttrs()
			attrs.Name, attrs.HardwareAddr = fmt.Sprintf("eth%d", e.Device), mac
			peer := fmt.Sprintf("vpc%d", e.Device)
			if err := h.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: peer}); err != nil {
				return err
			}
			pl, err := h.LinkByName(peer)
			if err != nil {
				return err
			}
			if err := h.LinkSetUp(pl); err != nil {
				return err
			}
			made[e.ID] = attrs.Name
		}
		return nil
	}
	if err := mirror(); err != nil {
		h.Close()
		return nil, err
	}
	eth0, err := h.LinkByName("eth0")
	if err == nil {
		err = h.AddrAdd(eth0, &netlink.Addr{IPNet: &net.IPNet{IP: fake.PrimaryIP().AsSlice(), Mask: net.CIDRMask(16, 32)}})
	}
	for _, name := range []string{"lo", "eth0"} {
		if err == nil {
			var l netlink.Link
			if l, err = h.LinkByName(name); err == nil {
				err = h.LinkSetUp(l)
			}
		}
	}
	if err == nil {
		err = node.Do(func(ns.NetNS) error { return writeSysctl("net/ipv4/ip_forward", "1") })
	}
	if err != nil {
		h.Close()
		return nil, err
	}
	go func() {
		defer h.Close()
		for ctx.Err() == nil {
			if err := mirror(); err != nil {
				logger.Error("attach ENI interface", "err", err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return ipamd.New(ipamd.Config{NodeName: "node-a", InstanceID: fake.InstanceID, NetNS: node.Path(), Dir: dir,
		VPCCIDR: netip.MustParsePrefix("172.31.0.0/16"), RouterIP: netip.MustParseAddr("172.31.0.1"),
		Targets: targets, PoolPeriod: 20 * time.Millisecond, IPCooldown: time.Nanosecond, Logger: logger}, fake)
}

func mustLink(t testing.TB, h *netlink.Handle, name string) netlink.Link {
	t.Helper()
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func writeSysctl(key, value string) error {
	return os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644)
}

func (v *vpcNode) conf(extra map[string]any) []byte {
	c := map[string]any{"mode": ModeVPC, "ipamdSocket": v.socket, "subnet": nil}
	for k, x := range extra {
		c[k] = x
	}
	return v.node.conf(c)
}

func (v *vpcNode) mustAdd(id string, pod ns.NetNS) *types100.Result {
	v.tb.Helper()
	r, err := v.add(id, pod, v.conf(nil))
	if err != nil {
		v.tb.Fatalf("ADD %s: %v", id, err)
	}
	return r
}

// rulesOf lists the node's rules of the plugin's priorities for ip.
func (v *vpcNode) rulesOf(t *testing.T, ip netip.Addr) []string {
	t.Helper()
	h := testutil.NetlinkHandle(t, v.ns)
	rules, err := h.RuleList(netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rules {
		if isPodRuleOf(r, ip) {
			out = append(out, fmt.Sprintf("%d:%d", r.Priority, r.Table))
		}
	}
	return out
}

func TestVPCModeAddDelWithTheIPAddressManager(t *testing.T) {
	v := newVPCNode(t)
	subnet := v.fake.Subnet
	pods := make([]ns.NetNS, 4)
	results := make([]*types100.Result, 4)
	for i := range pods {
		pods[i] = testutil.NetNS(t)
		results[i] = v.mustAdd(fmt.Sprintf("c%d", i), pods[i])
	}
	ips := make([]netip.Addr, 4)
	for i, r := range results {
		if len(r.IPs) != 1 || len(r.Interfaces) != 2 || r.Interfaces[0].Name != VPCHostVethName(fmt.Sprintf("c%d", i), "eth0") ||
			r.IPs[0].Gateway.String() != "169.254.1.1" {
			t.Fatalf("pod %d result %+v", i, r)
		}
		ones, _ := r.IPs[0].Address.Mask.Size()
		ip, _ := netip.AddrFromSlice(r.IPs[0].Address.IP.To4())
		if ones != 32 || !subnet.Contains(ip) {
			t.Fatalf("pod %d address %v: want a /32 of the node's subnet %s", i, r.IPs[0].Address.String(), subnet)
		}
		ips[i] = ip
	}
	// The first three are the primary ENI's (routed by main); the fourth is on eth1.
	for i := range 3 {
		if got := v.rulesOf(t, ips[i]); strings.Join(got, ",") != "512:254" {
			t.Errorf("pod %d (%s) rules %v, want only 512 to it lookup main", i, ips[i], got)
		}
	}
	if got := v.rulesOf(t, ips[3]); strings.Join(got, ",") != "512:254,1536:2" {
		t.Errorf("pod 3 (%s, eth1) rules %v, want 512 to it lookup main and 1536 from it lookup 2", ips[3], got)
	}
	h := testutil.NetlinkHandle(t, v.ns)
	table2, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: 2}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	hasDefault := false
	for _, r := range table2 {
		isDefault := r.Dst == nil || r.Dst.String() == "0.0.0.0/0"
		hasDefault = hasDefault || isDefault && r.Gw.String() == "172.31.0.1" && r.LinkIndex == mustLink(t, h, "eth1").Attrs().Index
	}
	if !hasDefault {
		t.Errorf("table 2 %v: want a default route via 172.31.0.1 out of eth1", table2)
	}
	// The pod's gateway is its host end's MAC, permanently.
	if err := pods[0].Do(func(ns.NetNS) error {
		neighs, err := netlink.NeighList(0, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		for _, n := range neighs {
			if n.IP.String() == "169.254.1.1" && n.State == netlink.NUD_PERMANENT && n.HardwareAddr.String() == results[0].Interfaces[0].Mac {
				return nil
			}
		}
		return fmt.Errorf("no permanent neighbour 169.254.1.1 at %s in %v", results[0].Interfaces[0].Mac, neighs)
	}); err != nil {
		t.Error(err)
	}

	// Pods reach each other and the node reaches them, without NAT.
	serve(t, pods[3], ips[3].String()+":8080", "pod3")
	serve(t, pods[0], ips[0].String()+":8080", "pod0")
	if got, err := dial(pods[1], ips[3].String()+":8080"); err != nil || !strings.HasPrefix(got, "pod3 "+ips[1].String()+":") {
		t.Errorf("pod1 → pod3: %q, %v; want pod3 to see pod1's address", got, err)
	}
	if got, err := dial(pods[3], ips[0].String()+":8080"); err != nil || !strings.HasPrefix(got, "pod0 "+ips[3].String()+":") {
		t.Errorf("pod3 → pod0: %q, %v", got, err)
	}
	if got, err := dial(v.ns, ips[3].String()+":8080"); err != nil || !strings.HasPrefix(got, "pod3 ") {
		t.Errorf("node → pod3: %q, %v", got, err)
	}

	if err := v.check("c3", pods[3], v.conf(nil)); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	if err := v.del("c3", pods[3], v.conf(nil)); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if l := linkIn(t, v.ns, VPCHostVethName("c3", "eth0")); l != nil {
		t.Errorf("host end left after DEL")
	}
	if got := v.rulesOf(t, ips[3]); len(got) != 0 {
		t.Errorf("rules of %s left after DEL: %v", ips[3], got)
	}
	if err := v.del("c3", pods[3], v.conf(nil)); err != nil {
		t.Errorf("second DEL: %v", err)
	}
	wantCode(t, v.check("c3", pods[3], v.conf(nil)), CodeCheckFailed, "holds no address")

	// GC: c1 is gone from the runtime.
	gcConf := v.conf(map[string]any{"cniVersion": "1.1.0", "cni.dev/valid-attachments": []map[string]string{
		{"containerID": "c0", "ifname": "eth0"}, {"containerID": "c2", "ifname": "eth0"}}})
	if _, err := v.call(func(p *Plugin) func(*skel.CmdArgs) error { return p.GC }, v.args("", nil, gcConf)); err != nil {
		t.Fatalf("GC: %v", err)
	}
	if l := linkIn(t, v.ns, VPCHostVethName("c1", "eth0")); l != nil {
		t.Errorf("GC left c1's veth")
	}
	if got := v.rulesOf(t, ips[1]); len(got) != 0 {
		t.Errorf("GC left c1's rules %v", got)
	}
	if got := v.rulesOf(t, ips[0]); len(got) != 1 {
		t.Errorf("GC took c0's rules: %v", got)
	}
}

func TestVPCModeFullNodeFailsCleanly(t *testing.T) {
	v := newVPCNode(t)
	for i := range 9 {
		v.mustAdd(fmt.Sprintf("c%d", i), testutil.NetNS(t))
	}
	pod := testutil.NetNS(t)
	_, err := v.add("c9", pod, v.conf(nil))
	wantCode(t, err, CodeRangeFull, "failed to assign an IP address to container")
	if l := linkIn(t, v.ns, VPCHostVethName("c9", "eth0")); l != nil {
		t.Errorf("failed ADD left its host end")
	}
	if l := linkIn(t, pod, "eth0"); l != nil {
		t.Errorf("failed ADD left the pod's interface")
	}
	if got := v.fake.Count("CreateNetworkInterface"); got != 2 {
		t.Errorf("%d ENIs created, want 2: no more than the instance type's three", got)
	}
}

// ipamdHelperEnv carries the node of TestIPAMDHelperProcess: the namespace's path, the
// manager's dir, the fake's limits and the pool's targets.
const ipamdHelperEnv = "KUBELAB_TEST_IPAMD_HELPER"

type ipamdHelperConf struct {
	NetNS, Dir          string
	MaxENIs, IPv4PerENI int
	Targets             ipamd.Targets
}

// TestIPAMDHelperProcess is not a test: newVPCNodeProc runs the test binary with only it
// and ipamdHelperEnv set, to have a node's IP address manager over a fake EC2 in a
// process of its own, as the manager is not in the runtime's process on a node. It says
// "ready" once the primary ENI's addresses are in the pool, and runs until stdin closes.
func TestIPAMDHelperProcess(t *testing.T) {
	env := os.Getenv(ipamdHelperEnv)
	if env == "" {
		t.Skip("run by newVPCNodeProc")
	}
	var c ipamdHelperConf
	if err := json.Unmarshal([]byte(env), &c); err != nil {
		t.Fatal(err)
	}
	node, err := ns.GetNS(c.NetNS)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fake := ipamdtest.New(c.MaxENIs, c.IPv4PerENI)
	m, err := runVPCNode(ctx, node, fake, c.Dir, c.Targets, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	testutil.Eventually(t, "the primary ENI's addresses", func() bool { return len(fake.Assigned()) == c.IPv4PerENI-1 })
	<-m.Started()
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// newVPCNodeProc is newVPCNodeOf with the IP address manager in a process of its own.
func newVPCNodeProc(t testing.TB, maxENIs, ipv4PerENI int, targets ipamd.Targets) *vpcNode {
	t.Helper()
	n := newNode(t, "")
	dir := filepath.Join(t.TempDir(), "aws-node")
	env, _ := json.Marshal(ipamdHelperConf{NetNS: n.ns.Path(), Dir: dir, MaxENIs: maxENIs, IPv4PerENI: ipv4PerENI, Targets: targets})
	cmd := exec.Command(os.Args[0], "-test.run=^TestIPAMDHelperProcess$")
	cmd.Env = append(os.Environ(), ipamdHelperEnv+"="+string(env))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = testWriter{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("ipamd helper: %v", err)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("ipamd helper: %q, %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return &vpcNode{node: n, socket: filepath.Join(dir, ipamd.SocketFile)}
}
