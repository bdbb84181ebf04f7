package plugin

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ns"
	"sigs.k8s.io/knftables"

	"github.com/kubelab/kubelab/internal/util/logging"
)

// SupportedVersions are the CNI spec versions the plugin speaks.
var SupportedVersions = []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}

// VersionInfo is the plugin's answer to VERSION.
func VersionInfo() version.PluginInfo { return version.PluginSupports(SupportedVersions...) }

// About is what the binary prints on stderr when run without CNI_COMMAND.
func About() string {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	return "CNI plugin kubelab-cni " + v
}

// Config holds the plugin's dependencies; the zero value is the binary's.
type Config struct {
	// Stdout receives the results (default os.Stdout).
	Stdout io.Writer
	// Logger receives what the plugin does besides its result (default slog.Default()).
	Logger *slog.Logger
	// NFTables opens the hostPort table in the calling thread's network namespace
	// (default: knftables.New, which runs nft).
	NFTables func() (knftables.Interface, error)
	// Timeout bounds one verb, mostly the wait for the IPAM store's lock (default 60s).
	Timeout time.Duration
}

// Plugin implements the verbs of kubelab-cni. Each runs in the calling thread's network
// namespace, which is the node's.
type Plugin struct {
	cfg Config
}

// New returns the plugin with cfg's defaults filled in.
func New(cfg Config) *Plugin {
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.NFTables == nil {
		cfg.NFTables = func() (knftables.Interface, error) {
			return knftables.New(knftables.IPv4Family, HostPortTable)
		}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 60 * time.Second
	}
	return &Plugin{cfg: cfg}
}

// Funcs are the plugin's verbs for skel.PluginMainFuncs.
func (p *Plugin) Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: inNodeNS(p.Add), Del: inNodeNS(p.Del), Check: inNodeNS(p.Check),
		Status: inNodeNS(p.Status), GC: inNodeNS(p.GC)}
}

// inNodeNS runs verb inside the node's network namespace when the configuration names one
// (nodeNetNS), else where it is called. A configuration that does not decode is left to
// verb to report.
func inNodeNS(verb func(*skel.CmdArgs) error) func(*skel.CmdArgs) error {
	return func(args *skel.CmdArgs) error {
		var c struct {
			NodeNetNS string `json:"nodeNetNS"`
		}
		if err := json.Unmarshal(args.StdinData, &c); err != nil || c.NodeNetNS == "" {
			return verb(args)
		}
		if !filepath.IsAbs(c.NodeNetNS) {
			return cniErrorf(types.ErrInvalidNetworkConfig, "nodeNetNS %q: want an absolute path", c.NodeNetNS)
		}
		node, err := ns.GetNS(c.NodeNetNS)
		if err != nil {
			return cniErrorf(CodeNodeNetwork, "node network namespace %s: %v", c.NodeNetNS, err)
		}
		defer node.Close()
		return node.Do(func(ns.NetNS) error { return verb(args) })
	}
}

// Main is the kubelab-cni binary: it reads the CNI environment and stdin, runs the verb
// and prints the result or the error, exiting 1 on error.
func Main() {
	if path := os.Getenv("PATH"); !slices.Contains(filepath.SplitList(path), "/usr/sbin") {
		// A runtime may exec the plugin with a PATH without the sbin directories, where
		// nft is.
		_ = os.Setenv("PATH", strings.Trim(path+":/usr/local/sbin:/usr/sbin:/sbin", ":"))
	}
	logger := logging.New(os.Stderr, logging.Text, slog.LevelWarn)
	skel.PluginMainFuncs(New(Config{Logger: logger}).Funcs(), VersionInfo(), About())
}

func (p *Plugin) context() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), p.cfg.Timeout)
}

// print writes result in the configuration's CNI version.
func (p *Plugin) print(result types.Result, cniVersion string) error {
	r, err := result.GetAsVersion(cniVersion)
	if err != nil {
		return cniErrorf(types.ErrIncompatibleCNIVersion, "convert result to CNI version %s: %v", cniVersion, err)
	}
	if err := r.PrintTo(p.cfg.Stdout); err != nil {
		return cniErrorf(types.ErrIOFailure, "write result: %v", err)
	}
	return nil
}

func logErr(l *slog.Logger, msg string, err error, args ...any) {
	if err != nil {
		l.Warn(msg, append(args, "err", err)...)
	}
}
