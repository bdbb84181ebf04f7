package cni

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kubelab/kubelab/internal/cni/plugin"
)

func TestConflist(t *testing.T) {
	b, err := Conflist("/run/netns/kubelab-x-n1", "10.244.1.0/24", "/data/ipam")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		CNIVersion string `json:"cniVersion"`
		Plugins    []struct {
			Type         string          `json:"type"`
			Bridge       string          `json:"bridge"`
			MTU          int             `json:"mtu"`
			Subnet       string          `json:"subnet"`
			DataDir      string          `json:"dataDir"`
			NodeNetNS    string          `json:"nodeNetNS"`
			Capabilities map[string]bool `json:"capabilities"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	p := c.Plugins[0]
	if c.CNIVersion != "1.0.0" || p.Type != "kubelab-cni" || p.Bridge != "cni0" || p.MTU != 1450 || p.Subnet != "10.244.1.0/24" ||
		p.DataDir != "/data/ipam" || p.NodeNetNS != "/run/netns/kubelab-x-n1" || !p.Capabilities["portMappings"] {
		t.Fatalf("conflist %s", b)
	}
	for _, bad := range []string{"", "10.244.1.0", "fd00::/64", "10.0.0.0/31"} {
		if _, err := Conflist("/run/netns/n", bad, "/d"); err == nil {
			t.Errorf("pod CIDR %q: no error", bad)
		}
	}
}

func TestInstallPlugins(t *testing.T) {
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref")
	plugin := filepath.Join(dir, "kubelab-cni")
	for _, f := range []string{plugin, filepath.Join(ref, "loopback")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "bin")
	for range 2 { // a second start finds the links
		if err := InstallPlugins(bin, plugin, ref); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]string{"kubelab-cni": plugin, "loopback": filepath.Join(ref, "loopback")} {
		if got, err := os.Readlink(filepath.Join(bin, name)); err != nil || got != want {
			t.Errorf("%s links to %q (%v), want %q", name, got, err, want)
		}
	}
	if err := InstallPlugins(bin, filepath.Join(dir, "missing"), ref); err == nil {
		t.Error("a missing plugin executable: no error")
	}
}

func TestWriterWaitsForPodCIDR(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	client := fake.NewClientset(node)
	looked := make(chan struct{}, 1)
	client.PrependReactor("get", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		select {
		case looked <- struct{}{}:
		default:
		}
		return false, nil, nil
	})
	dir := t.TempDir()
	w, err := New(Config{NodeName: "n1", NetNS: "/run/netns/n1", ConfDir: filepath.Join(dir, "net.d"), DataDir: filepath.Join(dir, "ipam")}, client)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	// No file while the node has no podCIDR: Run has looked at the node and still waits.
	<-looked
	select {
	case err := <-done:
		t.Fatalf("Run returned before the node had a podCIDR: %v", err)
	default:
	}
	node.Spec.PodCIDR = "10.244.2.0/24"
	if _, err := os.Stat(filepath.Join(dir, "net.d", ConfFile)); !os.IsNotExist(err) {
		t.Fatalf("conf written before the podCIDR: %v", err)
	}
	if _, err := client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "net.d", ConfFile))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Conflist("/run/netns/n1", "10.244.2.0/24", filepath.Join(dir, "ipam"))
	if string(b) != string(want) {
		t.Fatalf("conf %s, want %s", b, want)
	}
}

func TestVPCConflist(t *testing.T) {
	b, err := VPCConflist("/run/netns/kubelab-x-n1", "/data/nodes/n1/aws-node/ipamd.sock", "/data/cni")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		CNIVersion string           `json:"cniVersion"`
		Name       string           `json:"name"`
		Plugins    []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(b, &c); err != nil || len(c.Plugins) != 1 {
		t.Fatalf("conflist %s: %v", b, err)
	}
	// Each plugin gets the list's name and version, as the runtime passes it.
	p := c.Plugins[0]
	p["name"], p["cniVersion"] = c.Name, c.CNIVersion
	conf, _ := json.Marshal(p)
	nc, err := plugin.LoadNetConf(conf)
	if err != nil {
		t.Fatalf("the plugin refuses %s: %v", conf, err)
	}
	if nc.Mode != plugin.ModeVPC || nc.IPAMDSocket != "/data/nodes/n1/aws-node/ipamd.sock" || nc.MTU != 1500 || nc.Subnet != "" ||
		nc.NodeNetNS != "/run/netns/kubelab-x-n1" || !nc.Capabilities["portMappings"] {
		t.Errorf("loaded %+v from %s", nc, conf)
	}
	if _, err := VPCConflist("/run/netns/n", "ipamd.sock", "/d"); err == nil {
		t.Error("a relative socket path was accepted")
	}
}

func TestWriterVPCModeNeedsNoPodCIDR(t *testing.T) {
	dir := t.TempDir()
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	w, err := New(Config{NodeName: "n1", NetNS: "/run/netns/n1", ConfDir: filepath.Join(dir, "net.d"), DataDir: filepath.Join(dir, "cni"),
		IPAMDSocket: filepath.Join(dir, "ipamd.sock")}, client)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "net.d", ConfFile))
	if err != nil || !strings.Contains(string(b), `"mode": "vpc"`) {
		t.Fatalf("conflist %s (%v): want VPC mode", b, err)
	}
}
