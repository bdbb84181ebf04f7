package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	types040 "github.com/containernetworking/cni/pkg/types/040"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/vishvananda/netlink"
)

func TestBinaryProtocolErrors(t *testing.T) {
	n := newNode(t, "10.244.30.0/24")
	bin := pluginBinary(t)
	pod := testutil.NetNS(t)

	out, err := execPlugin(n.ns, bin, map[string]string{"CNI_COMMAND": "VERSION"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var vi struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	if err := json.Unmarshal(out, &vi); err != nil || strings.Join(vi.SupportedVersions, ",") != "0.3.0,0.3.1,0.4.0,1.0.0,1.1.0" {
		t.Fatalf("VERSION: %s %v", out, err)
	}

	for _, tc := range []struct {
		name  string
		env   map[string]string
		stdin string
		code  uint
		msg   string
	}{
		{"malformed", cniEnv("ADD", "c1", pod), `{"cniVersion":"1.0.0","name":"k",`, types.ErrDecodingFailure, "unexpected end of JSON input"},
		{"no subnet", cniEnv("ADD", "c1", pod), fmt.Sprintf(`{"cniVersion":"1.0.0","name":"k","type":"kubelab-cni","dataDir":%q}`, n.dataDir), types.ErrInvalidNetworkConfig, "subnet is required"},
		{"no name", cniEnv("ADD", "c1", pod), `{"cniVersion":"1.0.0","type":"kubelab-cni"}`, types.ErrInvalidNetworkConfig, "missing network name"},
		{"old version", cniEnv("ADD", "c1", pod), strings.Replace(string(n.conf(nil)), `"1.0.0"`, `"0.2.0"`, 1), types.ErrIncompatibleCNIVersion, "incompatible CNI versions"},
		{"future version", cniEnv("ADD", "c1", pod), strings.Replace(string(n.conf(nil)), `"1.0.0"`, `"9.0.0"`, 1), types.ErrIncompatibleCNIVersion, "incompatible CNI versions"},
		{"status below 1.1", map[string]string{"CNI_COMMAND": "STATUS"}, string(n.conf(nil)), types.ErrIncompatibleCNIVersion, "does not allow STATUS"},
		{"no container id", map[string]string{"CNI_COMMAND": "ADD", "CNI_NETNS": pod.Path(), "CNI_IFNAME": "eth0"}, string(n.conf(nil)), types.ErrInvalidEnvironmentVariables, "CNI_CONTAINERID"},
		{"netns missing", cniEnv("ADD", "c1", nil), string(n.conf(nil)), types.ErrInvalidEnvironmentVariables, "CNI_NETNS"},
		{"netns not a netns", map[string]string{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1", "CNI_IFNAME": "eth0", "CNI_NETNS": t.TempDir()}, string(n.conf(nil)), types.ErrInvalidEnvironmentVariables, "CNI_NETNS"},
		{"node's own netns", map[string]string{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1", "CNI_IFNAME": "eth0", "CNI_NETNS": n.ns.Path()}, string(n.conf(nil)), types.ErrInvalidEnvironmentVariables, "the node's own namespace"},
	} {
		_, err := execPlugin(n.ns, bin, tc.env, []byte(tc.stdin))
		var e *types.Error
		if !errors.As(err, &e) || e.Code != tc.code || !strings.Contains(e.Error(), tc.msg) {
			t.Errorf("%s: %v, want code %d saying %q", tc.name, err, tc.code, tc.msg)
		}
	}
	if l := linkIn(t, n.ns, "cni0"); l != nil {
		t.Fatal("a refused ADD made the bridge")
	}
}

// conflist writes a network configuration list of the node's config in version v.
func (n *node) conflist(v string, capabilities bool) *libcni.NetworkConfigList {
	n.tb.Helper()
	plugin := map[string]any{"type": "kubelab-cni", "subnet": n.subnet, "dataDir": n.dataDir, "bridge": n.bridge}
	if capabilities {
		plugin["capabilities"] = map[string]bool{"portMappings": true}
	}
	b, err := json.Marshal(map[string]any{"cniVersion": v, "name": "kubelab", "plugins": []any{plugin}})
	if err != nil {
		n.tb.Fatal(err)
	}
	list, err := libcni.NetworkConfFromBytes(b)
	if err != nil {
		n.tb.Fatal(err)
	}
	return list
}

// TestConflist100EndToEnd drives the binary as containerd does: libcni, a "1.0.0"
// conflist, the portMappings capability, ADD, CHECK, DEL, DEL.
func TestConflist100EndToEnd(t *testing.T) {
	n := nodeWithAddress(t, "10.244.31.0/24", "172.31.250.4")
	bin := pluginBinary(t)
	cni := libcni.NewCNIConfigWithCacheDir([]string{filepath.Dir(bin)}, t.TempDir(), nil)
	list := n.conflist("1.0.0", true)
	pod := testutil.NetNS(t)
	rt := &libcni.RuntimeConf{
		ContainerID: "0123456789abcdef0123456789abcdef", NetNS: pod.Path(), IfName: "eth0",
		CapabilityArgs: map[string]any{"portMappings": []map[string]any{{"hostPort": 8443, "containerPort": 443, "protocol": "tcp"}}},
	}
	ctx := context.Background()
	var result types.Result
	err := n.ns.Do(func(ns.NetNS) error {
		var err error
		result, err = cni.AddNetworkList(ctx, list, rt)
		return err
	})
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	if result.Version() != "1.0.0" {
		t.Fatalf("result version %s, want the conflist's 1.0.0", result.Version())
	}
	r, err := types100.GetResult(result)
	if err != nil || len(r.IPs) != 1 || r.IPs[0].Address.String() != "10.244.31.2/24" || r.IPs[0].Gateway.String() != "10.244.31.1" {
		t.Fatalf("result %+v %v", r, err)
	}
	podIP := r.IPs[0].Address.IP.String()
	serve(t, pod, podIP+":443", "pod")
	if got, err := dial(n.ns, "172.31.250.4:8443"); err != nil || !strings.HasPrefix(got, "pod ") {
		t.Fatalf("hostPort from the node: %q %v", got, err)
	}
	if err := n.ns.Do(func(ns.NetNS) error { return cni.CheckNetworkList(ctx, list, rt) }); err != nil {
		t.Fatalf("CHECK: %v", err)
	}
	for i := range 2 {
		if err := n.ns.Do(func(ns.NetNS) error { return cni.DelNetworkList(ctx, list, rt) }); err != nil {
			t.Fatalf("DEL %d: %v", i+1, err)
		}
	}
	if l := linkIn(t, n.ns, HostVethName(rt.ContainerID, "eth0")); l != nil {
		t.Fatal("veth left after DEL")
	}
	if files := n.ipamFiles(); len(files) != 0 {
		t.Fatalf("ipam files left after DEL: %v", files)
	}
	if elements, _ := hostPortState(t, n); len(elements) != 0 {
		t.Fatalf("hostPorts left after DEL: %v", elements)
	}
	if _, err := os.Stat(filepath.Join(n.dataDir, hostPortMarkerDir, hostPortChain(rt.ContainerID, "eth0"))); !os.IsNotExist(err) {
		t.Fatalf("hostPort marker left after DEL: %v", err)
	}
}

// TestConflist110StatusAndGC uses the verbs of spec 1.1 through libcni.
func TestConflist110StatusAndGC(t *testing.T) {
	n := newNode(t, "10.244.32.0/24")
	bin := pluginBinary(t)
	cni := libcni.NewCNIConfigWithCacheDir([]string{filepath.Dir(bin)}, t.TempDir(), nil)
	list := n.conflist("1.1.0", false)
	ctx := context.Background()
	var keep *libcni.RuntimeConf
	err := n.ns.Do(func(ns.NetNS) error {
		if err := cni.GetStatusNetworkList(ctx, list); err != nil {
			return fmt.Errorf("STATUS: %w", err)
		}
		for _, id := range []string{"keep", "gone"} {
			rt := &libcni.RuntimeConf{ContainerID: id, NetNS: testutil.NetNS(t).Path(), IfName: "eth0"}
			if _, err := cni.AddNetworkList(ctx, list, rt); err != nil {
				return fmt.Errorf("ADD %s: %w", id, err)
			}
			if id == "keep" {
				keep = rt
			}
		}
		return cni.GCNetworkList(ctx, list, &libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: "keep", IfName: "eth0"}}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if files := n.ipamFiles(); len(files) != 1 {
		t.Fatalf("ipam files after GC: %v, want keep's", files)
	}
	if err := n.ns.Do(func(ns.NetNS) error { return cni.CheckNetworkList(ctx, list, keep) }); err != nil {
		t.Fatalf("CHECK of the kept pod after GC: %v", err)
	}
}

// TestOldVersionResult: a 0.3.1 configuration gets a 0.3.1 result.
func TestOldVersionResult(t *testing.T) {
	n := newNode(t, "10.244.33.0/24")
	n.version = "0.3.1"
	bin := pluginBinary(t)
	pod := testutil.NetNS(t)
	out, err := execPlugin(n.ns, bin, cniEnv("ADD", "c1", pod), n.conf(nil))
	if err != nil {
		t.Fatal(err)
	}
	var r types040.Result
	if err := json.Unmarshal(out, &r); err != nil || r.CNIVersion != "0.3.1" || len(r.IPs) != 1 || r.IPs[0].Address.String() != "10.244.33.2/24" {
		t.Fatalf("0.3.1 result %s: %v", out, err)
	}
	if _, err := execPlugin(n.ns, bin, cniEnv("DEL", "c1", pod), n.conf(nil)); err != nil {
		t.Fatal(err)
	}
}

// TestNodeNetNSFromOutside runs the binary from the test's own namespace, as a runtime
// outside the node's namespace does, with nodeNetNS naming the node's: the bridge and the
// host end of the veth are made in the node's namespace, nothing where the plugin ran.
func TestNodeNetNSFromOutside(t *testing.T) {
	n := newNode(t, "10.244.32.0/24")
	bin := pluginBinary(t)
	cni := libcni.NewCNIConfigWithCacheDir([]string{filepath.Dir(bin)}, t.TempDir(), nil)
	b, err := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "kubelab", "plugins": []any{map[string]any{
		"type": "kubelab-cni", "subnet": n.subnet, "dataDir": n.dataDir, "bridge": n.bridge, "nodeNetNS": n.ns.Path()}}})
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.NetworkConfFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	pod := testutil.NetNS(t)
	rt := &libcni.RuntimeConf{ContainerID: "fedcba9876543210fedcba9876543210", NetNS: pod.Path(), IfName: "eth0"}
	ctx := context.Background()
	if _, err := cni.AddNetworkList(ctx, list, rt); err != nil {
		t.Fatalf("ADD from outside the node: %v", err)
	}
	veth := HostVethName(rt.ContainerID, "eth0")
	if linkIn(t, n.ns, "cni0") == nil || linkIn(t, n.ns, veth) == nil {
		t.Fatal("bridge or veth not in the node's namespace")
	}
	if _, err := netlink.LinkByName(veth); err == nil {
		t.Fatalf("veth %s made where the plugin ran, not in the node's namespace", veth)
	}
	if err := cni.DelNetworkList(ctx, list, rt); err != nil {
		t.Fatalf("DEL from outside the node: %v", err)
	}
	if linkIn(t, n.ns, veth) != nil || len(n.ipamFiles()) != 0 {
		t.Fatal("veth or allocation left after DEL")
	}
	bad, _ := libcni.NetworkConfFromBytes([]byte(strings.Replace(string(b), n.ns.Path(), "/nonexistent/netns", 1)))
	_, err = cni.AddNetworkList(ctx, bad, rt)
	var e *types.Error
	if !errors.As(err, &e) || e.Code != CodeNodeNetwork || !strings.Contains(e.Msg, "/nonexistent/netns") {
		t.Fatalf("ADD with a missing node namespace: %v, want code %d naming it", err, CodeNodeNetwork)
	}
}
