package containerd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubelab/kubelab/internal/util/rundir"
)

func TestNewDefaultsAndValidation(t *testing.T) {
	c, err := New(Config{Name: "n1", Dir: "/var/lib/kubelab/nodes/n1/containerd"})
	if err != nil {
		t.Fatal(err)
	}
	if c.cfg.SandboxImage != DefaultSandboxImage || c.cfg.CNIBinDir != DefaultCNIBinDir || c.cfg.Binary != DefaultBinary {
		t.Errorf("defaults not applied: %+v", c.cfg)
	}
	if want := "/var/lib/kubelab/nodes/n1/containerd/cni/net.d"; c.cfg.CNIConfDir != want {
		t.Errorf("CNIConfDir = %q, want %q", c.cfg.CNIConfDir, want)
	}
	if want := "unix://" + rundir.For("/var/lib/kubelab/nodes/n1/containerd") + "/containerd.sock"; c.Endpoint() != want {
		t.Errorf("Endpoint() = %q, want %q", c.Endpoint(), want)
	}

	for name, cfg := range map[string]Config{
		"no dir":           {Name: "n1"},
		"registry no port": {Dir: "/x", RegistryAddr: "127.0.0.1"},
		"relative cni dir": {Dir: "/x", CNIBinDir: "cni"},
		"newline in image": {Dir: "/x", SandboxImage: "a\nb"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New(%+v) succeeded, want an error", name, cfg)
		}
	}
}

// TestSocketDir: the sockets go to SocketDir, by default the run directory of Dir, short
// and the same whatever Dir's length; a SocketDir too long for them is refused.
func TestSocketDir(t *testing.T) {
	for _, dir := range []string{"/var/lib/kubelab/nodes/n1/containerd", "/tmp/" + strings.Repeat("d", 200) + "/nodes/n1/containerd"} {
		c, err := New(Config{Name: "n1", Dir: dir})
		if err != nil {
			t.Fatalf("New with a %d-byte dir: %v", len(dir), err)
		}
		if want := rundir.For(dir); c.p.sockDir != want || c.cfg.SocketDir != want {
			t.Errorf("socket dir of a %d-byte dir = %q, want %q", len(dir), c.p.sockDir, want)
		}
		if c.p.ttrpcSocket != filepath.Join(rundir.For(dir), "containerd.sock.ttrpc") {
			t.Errorf("ttrpc socket = %q, want it in %s", c.p.ttrpcSocket, rundir.For(dir))
		}
	}
	c, err := New(Config{Name: "n1", Dir: "/d", SocketDir: "/run/x/n1/containerd"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Endpoint() != "unix:///run/x/n1/containerd/containerd.sock" || c.p.ttrpcSocket != "/run/x/n1/containerd/containerd.sock.ttrpc" {
		t.Errorf("with a socket dir: endpoint %q, ttrpc socket %q", c.Endpoint(), c.p.ttrpcSocket)
	}
	// The longest socket dir that still holds the ttrpc socket, and one byte more.
	edge := "/" + strings.Repeat("e", rundir.MaxSocketPath-len("/containerd.sock.ttrpc")-1)
	if _, err := New(Config{Dir: "/d", SocketDir: edge}); err != nil {
		t.Errorf("a %d-byte socket dir: %v", len(edge), err)
	}
	if _, err := New(Config{Dir: "/d", SocketDir: edge + "e"}); err == nil {
		t.Errorf("a %d-byte socket dir was accepted: its ttrpc socket would not fit", len(edge)+1)
	}
	if _, err := New(Config{Dir: "/d", SocketDir: "run"}); err == nil {
		t.Error("a relative socket dir was accepted")
	}
}

func TestRenderConfig(t *testing.T) {
	cfg := Config{Name: `n"1`, Dir: "/d", SocketDir: "/r", RegistryAddr: "127.0.0.1:5000"}
	cfg.setDefaults()
	got := string(renderConfig(cfg, newPaths(cfg.Dir, cfg.SocketDir), false))
	if restricted := string(renderConfig(cfg, newPaths(cfg.Dir, cfg.SocketDir), true)); !strings.Contains(restricted, "restrict_oom_score_adj = true") {
		t.Errorf("restricted config lacks restrict_oom_score_adj = true:\n%s", restricted)
	}
	for _, want := range []string{
		"version = 2\n",
		`root = "/d/root"`,
		`state = "/d/state"`,
		"[grpc]\n  address = \"/r/containerd.sock\"\n",
		"[ttrpc]\n  address = \"/r/containerd.sock.ttrpc\"\n",
		"[debug]\n  address = \"\"\n",
		"[metrics]\n  address = \"\"\n",
		"[plugins.\"io.containerd.internal.v1.opt\"]\n  path = \"/d/opt\"\n",
		`required_plugins = ["io.containerd.grpc.v1.cri"]`,
		`"io.containerd.snapshotter.v1.devmapper"`,
		`sandbox_image = "registry.k8s.io/pause:3.10"`,
		`stream_server_address = "127.0.0.1"`,
		`stream_server_port = "0"`,
		"enable_selinux = false",
		"disable_apparmor = true",
		"restrict_oom_score_adj = false",
		"tolerate_missing_hugetlb_controller = true",
		"netns_mounts_under_state_dir = true",
		`snapshotter = "overlayfs"`,
		`runtime_type = "io.containerd.runc.v2"`,
		"SystemdCgroup = false",
		`Root = "/d/state/runc"`,
		`bin_dir = "/usr/lib/cni"`,
		`conf_dir = "/d/cni/net.d"`,
		"max_conf_num = 1",
		`config_path = "/d/certs.d"`,
		`node "n\"1"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("config lacks %q:\n%s", want, got)
		}
	}
}

func TestWriteConfigHosts(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, SocketDir: filepath.Join(dir, "run"), RegistryAddr: "127.0.0.1:5000"}
	cfg.setDefaults()
	p := newPaths(dir, cfg.SocketDir)
	// A host dir from an earlier config must go.
	if err := os.MkdirAll(filepath.Join(p.certsDir, "quay.io"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeConfig(cfg, p); err != nil {
		t.Fatal(err)
	}
	want := "server = \"http://127.0.0.1:5000\"\n\n[host.\"http://127.0.0.1:5000\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
	for _, h := range []string{"_default", "docker.io", "registry.k8s.io"} {
		b, err := os.ReadFile(filepath.Join(p.certsDir, h, "hosts.toml"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("%s/hosts.toml = %q, want it to contain %q", h, b, want)
		}
	}
	if _, err := os.Stat(filepath.Join(p.certsDir, "quay.io")); !os.IsNotExist(err) {
		t.Errorf("stale quay.io host dir survived: %v", err)
	}
	for _, d := range []string{p.root, p.state, p.optDir, cfg.CNIConfDir} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			t.Errorf("%s was not made: %v", d, err)
		}
	}
	if _, err := os.Stat(p.config); err != nil {
		t.Error(err)
	}

	// Without a registry there is no mirror.
	cfg.RegistryAddr = ""
	if err := writeConfig(cfg, p); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(p.certsDir); len(entries) != 0 {
		t.Errorf("certs.d holds %d entries without a registry", len(entries))
	}
}

func TestTOMLString(t *testing.T) {
	for in, want := range map[string]string{
		`/a/b`:     `"/a/b"`,
		`a"b\c`:    `"a\"b\\c"`,
		"a\tb\x7f": `"a\u0009b\u007F"`,
	} {
		if got := tomlString(in); got != want {
			t.Errorf("tomlString(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestProcessMatching(t *testing.T) {
	sock := "/d/containerd.sock"
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"/usr/bin/containerd-shim-runc-v2", "-namespace", "k8s.io", "-id", "abc", "-address", sock}, true},
		{[]string{"containerd-shim-runc-v2", "-namespace", "k8s.io", "-address=" + sock, "-publish-binary", "containerd", "-id", "x", "start"}, true},
		{[]string{"containerd-shim-runc-v2", "--address", "unix://" + sock}, true},
		{[]string{"containerd-shim-runc-v2", "-address", "/other/containerd.sock"}, false},
		{[]string{"containerd-shim-runc-v2", "-address", sock + ".ttrpc"}, false},
		{[]string{"sleep", "-address", sock}, false},
		{[]string{"containerd-shim-runc-v2", "-address"}, false},
		{nil, false},
	} {
		if got := isShimOf(tc.args, sock); got != tc.want {
			t.Errorf("isShimOf(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}

	cfg := "/d/config.toml"
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"containerd", "--config", cfg}, true},
		{[]string{"/usr/bin/containerd", "-c", cfg}, true},
		{[]string{"containerd", "--config=" + cfg}, true},
		{[]string{"containerd", "--config", "/other/config.toml"}, false},
		{[]string{"containerd-shim-runc-v2", "--config", cfg}, false},
		{[]string{"containerd"}, false},
		{[]string{"/opt/bin/containerd-1.6", "--config", cfg}, false},
	} {
		if got := isContainerdOf(tc.args, "containerd", cfg); got != tc.want {
			t.Errorf("isContainerdOf(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

func TestIsContainerdOfOtherBinary(t *testing.T) {
	if !isContainerdOf([]string{"/opt/bin/containerd-1.6", "--config", "/c"}, "/opt/bin/containerd-1.6", "/c") {
		t.Error("a containerd run from a configured binary is not recognized")
	}
}

func TestLockDir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "containerd.lock")
	unlock, err := lockDir(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockDir(path); err == nil || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("second lockDir = %v, want a locked error", err)
	}
	unlock()
	unlock2, err := lockDir(path)
	if err != nil {
		t.Fatalf("lockDir after unlock: %v", err)
	}
	unlock2()
}

func TestProcessRunning(t *testing.T) {
	if !processRunning(os.Getpid()) {
		t.Error("this test's own process does not count as running")
	}
	if processRunning(1 << 30) {
		t.Error("a pid beyond pid_max counts as running")
	}
}
