package containerd

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kubelab/kubelab/internal/util/atomicfile"
	"github.com/kubelab/kubelab/internal/util/rundir"
)

// Config describes one node's containerd.
type Config struct {
	// Name is the node's name; it only labels logs.
	Name string
	// Dir holds everything of this instance but its sockets: root/ (images, snapshots,
	// metadata), state/ (tasks, sandboxes, network namespaces, runc state), config.toml,
	// certs.d/, containerd.pid and containerd.log. E.g. <data-dir>/nodes/<node>/containerd.
	Dir string
	// SocketDir holds the instance's sockets, containerd.sock (gRPC: the containerd API
	// and CRI) and containerd.sock.ttrpc (the shims' events); their paths must fit in a
	// unix socket address whatever Dir's length. rundir.For(Dir) when empty.
	SocketDir string
	// RegistryAddr is host:port of kubelab's plain-HTTP OCI registry. It serves every
	// registry: docker.io/library/nginx as /v2/library/nginx/…?ns=docker.io,
	// registry.k8s.io/pause as /v2/pause/…?ns=registry.k8s.io, and any other registry host
	// the same way (containerd adds ?ns=<the image's registry> for a mirror; kubelab's
	// registry fetches from there what it does not hold, and asks for the pull's
	// credentials with a Basic challenge when that registry wants them). Empty: no mirror
	// is written and containerd resolves registries itself.
	RegistryAddr string
	// SandboxImage is the image of the pods' sandbox (pause) containers;
	// "registry.k8s.io/pause:3.10" when empty.
	SandboxImage string
	// CNIBinDir holds the CNI plugins; /usr/lib/cni when empty.
	CNIBinDir string
	// CNIConfDir is where the node's CNI network config is dropped; <Dir>/cni/net.d when
	// empty. Until a config is there, CRI Status reports NetworkReady false.
	CNIConfDir string
	// NetNS is the network namespace (a path) containerd runs in: host-network pods share
	// it, and its streaming server (exec, attach, port-forward) listens in it. Empty: the
	// caller's own.
	NetNS string
	// Binary is the containerd executable; "containerd" from PATH when empty.
	Binary string
	// Logger receives this package's logs (containerd's own go to <Dir>/containerd.log);
	// slog.Default() when nil.
	Logger *slog.Logger
}

// Defaults for the empty fields of Config.
const (
	DefaultSandboxImage = "registry.k8s.io/pause:3.10"
	DefaultCNIBinDir    = "/usr/lib/cni"
	DefaultBinary       = "containerd"
)

// criNamespace is the containerd namespace of everything the CRI plugin creates.
const criNamespace = "k8s.io"

// mirroredHosts get their own hosts.toml beside _default, the fallback for every other
// registry host.
var mirroredHosts = []string{"_default", "docker.io", "registry.k8s.io"}

func (c *Config) validate() error {
	if c.Dir == "" {
		return errors.New("containerd: dir is required")
	}
	if !filepath.IsAbs(c.Dir) {
		return fmt.Errorf("containerd: dir %q is not absolute", c.Dir)
	}
	if c.RegistryAddr != "" {
		host, port, err := net.SplitHostPort(c.RegistryAddr)
		if err != nil || host == "" || port == "" {
			return fmt.Errorf("containerd: registry address %q is not host:port", c.RegistryAddr)
		}
	}
	if !filepath.IsAbs(c.SocketDir) {
		return fmt.Errorf("containerd: socket dir %q is not absolute", c.SocketDir)
	}
	if err := rundir.CheckSocket(filepath.Join(c.SocketDir, ttrpcSocketName)); err != nil {
		return fmt.Errorf("containerd: socket dir %s: %w", c.SocketDir, err)
	}
	if c.NetNS != "" && !filepath.IsAbs(c.NetNS) {
		return fmt.Errorf("containerd: network namespace %q is not an absolute path", c.NetNS)
	}
	if !filepath.IsAbs(c.CNIBinDir) || !filepath.IsAbs(c.CNIConfDir) {
		return fmt.Errorf("containerd: CNI dirs %q and %q must be absolute", c.CNIBinDir, c.CNIConfDir)
	}
	for what, s := range map[string]string{"sandbox image": c.SandboxImage, "binary": c.Binary} {
		if strings.ContainsAny(s, "\x00\n") {
			return fmt.Errorf("containerd: %s %q is not valid", what, s)
		}
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Dir != "" {
		if abs, err := filepath.Abs(c.Dir); err == nil {
			c.Dir = abs
		}
	}
	if c.SandboxImage == "" {
		c.SandboxImage = DefaultSandboxImage
	}
	if c.CNIBinDir == "" {
		c.CNIBinDir = DefaultCNIBinDir
	}
	if c.SocketDir == "" && c.Dir != "" {
		c.SocketDir = rundir.For(c.Dir)
	}
	if c.CNIConfDir == "" && c.Dir != "" {
		c.CNIConfDir = filepath.Join(c.Dir, "cni", "net.d")
	}
	if c.Binary == "" {
		c.Binary = DefaultBinary
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// The sockets' names in the socket dir.
const (
	socketName      = "containerd.sock"
	ttrpcSocketName = "containerd.sock.ttrpc"
)

// paths are the files and directories of one instance, derived from Config.Dir and
// Config.SocketDir.
type paths struct {
	dir      string
	root     string // containerd's root: content, snapshots, metadata
	state    string // containerd's state: bundles, sandboxes, netns, runc state
	runcRoot string // runc's state dir (the runtime's Root option)
	config   string
	pidFile  string
	logFile  string
	lockFile string // held by Run
	certsDir string // registry hosts config (registry.config_path)
	optDir   string // the opt plugin's dir
	tempDir  string

	sockDir     string // Config.SocketDir
	socket      string // gRPC (containerd API and CRI)
	ttrpcSocket string // ttrpc (shims' events)
}

func newPaths(dir, sockDir string) paths {
	p := paths{
		dir:      dir,
		root:     filepath.Join(dir, "root"),
		state:    filepath.Join(dir, "state"),
		config:   filepath.Join(dir, "config.toml"),
		pidFile:  filepath.Join(dir, "containerd.pid"),
		logFile:  filepath.Join(dir, "containerd.log"),
		lockFile: filepath.Join(dir, "containerd.lock"),
		certsDir: filepath.Join(dir, "certs.d"),
		optDir:   filepath.Join(dir, "opt"),
		tempDir:  filepath.Join(dir, "tmp"),
	}
	p.runcRoot = filepath.Join(p.state, "runc")
	p.sockDir = sockDir
	p.socket = filepath.Join(sockDir, socketName)
	p.ttrpcSocket = filepath.Join(sockDir, ttrpcSocketName)
	return p
}

// renderConfig is containerd's config.toml (version 2) for this instance. Everything that
// containerd would otherwise share between instances (root, state, sockets, runc state,
// the opt dir, network namespaces, registry config) points into this instance's dirs.
//
// restrictOOM is restrict_oom_score_adj: when containerd may not lower oom_score_adj (it
// lacks CAP_SYS_RESOURCE, as in some VMs and containers), runc would fail to start every
// sandbox (CRI asks for -998); restricted, containerd raises such values to its own.
func renderConfig(cfg Config, p paths, restrictOOM bool) []byte {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	q := tomlString
	const cri = `plugins."io.containerd.grpc.v1.cri"`

	w("# Written by kubelab for node %s; rewritten at every start.", q(cfg.Name))
	w("version = 2")
	w("root = %s", q(p.root))
	w("state = %s", q(p.state))
	w("temp = %s", q(p.tempDir))
	// CRI is what the kubelet needs: containerd fails to start when it does not load.
	w("required_plugins = [%s]", q("io.containerd.grpc.v1.cri"))
	// Snapshotters that cannot work here (or need setup) and tracing: skipping them saves
	// a few milliseconds of start-up and the warnings they log.
	w("disabled_plugins = [%s]", strings.Join([]string{
		q("io.containerd.snapshotter.v1.aufs"),
		q("io.containerd.snapshotter.v1.btrfs"),
		q("io.containerd.snapshotter.v1.zfs"),
		q("io.containerd.snapshotter.v1.devmapper"),
		q("io.containerd.tracing.processor.v1.otlp"),
		q("io.containerd.internal.v1.tracing"),
	}, ", "))
	w("")
	w("[grpc]")
	w("  address = %s", q(p.socket))
	w("[ttrpc]")
	w("  address = %s", q(p.ttrpcSocket))
	w("[debug]")
	w(`  address = ""`)
	w(`  level = "info"`)
	w("[metrics]")
	w(`  address = ""`)
	w("")
	w(`[plugins."io.containerd.internal.v1.opt"]`)
	w("  path = %s", q(p.optDir))
	w("")
	w("[%s]", cri)
	w("  sandbox_image = %s", q(cfg.SandboxImage))
	w(`  stream_server_address = "127.0.0.1"`)
	w(`  stream_server_port = "0"`)
	w("  enable_selinux = false")
	w("  disable_apparmor = true")
	w("  restrict_oom_score_adj = %t", restrictOOM)
	w("  tolerate_missing_hugetlb_controller = true")
	// Pods' network namespaces are bind-mounted under <state>/io.containerd.grpc.v1.cri/netns
	// rather than the shared /var/run/netns, so each instance finds and removes its own.
	w("  netns_mounts_under_state_dir = true")
	w("  [%s.containerd]", cri)
	w("    snapshotter = %s", q(snapshotter))
	w(`    default_runtime_name = "runc"`)
	w("    [%s.containerd.runtimes.runc]", cri)
	w(`      runtime_type = "io.containerd.runc.v2"`)
	w("      [%s.containerd.runtimes.runc.options]", cri)
	w("        SystemdCgroup = false")
	w("        Root = %s", q(p.runcRoot))
	w("  [%s.cni]", cri)
	w("    bin_dir = %s", q(cfg.CNIBinDir))
	w("    conf_dir = %s", q(cfg.CNIConfDir))
	w("    max_conf_num = 1")
	w("  [%s.registry]", cri)
	w("    config_path = %s", q(p.certsDir))
	return []byte(b.String())
}

// renderHosts is the hosts.toml that sends pulls and resolves of a registry to kubelab's
// registry over plain HTTP. containerd 1.6 ignores a hosts.toml without a [host] table
// (it then falls back to the registry's real address), so the registry is named both as
// a [host] (tried first) and as the server; the path /v2 is appended to both.
func renderHosts(registryAddr string) []byte {
	url := tomlString("http://" + registryAddr)
	return []byte(fmt.Sprintf(`# Written by kubelab: kubelab's local registry serves this registry.
server = %s

[host.%s]
  capabilities = ["pull", "resolve"]
`, url, url))
}

// writeConfig writes config.toml and the registry hosts dirs, and makes the dirs the
// config names.
func writeConfig(cfg Config, p paths) error {
	for _, d := range []string{p.dir, p.root, p.state, p.optDir, p.tempDir, p.sockDir, cfg.CNIConfDir} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return fmt.Errorf("make %s: %w", d, err)
		}
	}
	// certs.d is ours alone: rebuild it so that a changed registry address leaves nothing
	// stale behind.
	if err := os.RemoveAll(p.certsDir); err != nil {
		return fmt.Errorf("clear %s: %w", p.certsDir, err)
	}
	if err := os.MkdirAll(p.certsDir, 0o755); err != nil {
		return fmt.Errorf("make %s: %w", p.certsDir, err)
	}
	if cfg.RegistryAddr != "" {
		hosts := renderHosts(cfg.RegistryAddr)
		for _, h := range mirroredHosts {
			d := filepath.Join(p.certsDir, h)
			if err := os.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("make %s: %w", d, err)
			}
			if err := atomicfile.WriteFile(filepath.Join(d, "hosts.toml"), hosts, 0o644); err != nil {
				return err
			}
		}
	}
	return atomicfile.WriteFile(p.config, renderConfig(cfg, p, !canLowerOOMScoreAdj()), 0o644)
}

// canLowerOOMScoreAdj says whether this process (and so containerd, which inherits its
// capabilities) has CAP_SYS_RESOURCE, which lowering an oom_score_adj takes.
func canLowerOOMScoreAdj() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if hexCaps, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(hexCaps), 16, 64)
			return err == nil && caps&(1<<unix.CAP_SYS_RESOURCE) != 0
		}
	}
	return false
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
