package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/kubelab/kubelab/internal/testutil"
)

// pluginBinary is kubelab-cni as hack/build.sh builds it (testutil.Commands).
func pluginBinary(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(testutil.Commands(tb), "kubelab-cni")
}

type testWriter struct{ tb testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.tb.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func testLogger(tb testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{tb}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// node is a test's "node": a namespace the plugin runs in, with its data dir.
type node struct {
	tb      testing.TB
	ns      ns.NetNS
	subnet  string
	dataDir string
	bridge  string
	version string
}

func newNode(tb testing.TB, subnet string) *node {
	tb.Helper()
	testutil.RequireRoot(tb, "nft")
	return &node{tb: tb, ns: testutil.NetNS(tb), subnet: subnet, dataDir: filepath.Join(tb.TempDir(), "ipam"), bridge: "cni0", version: "1.0.0"}
}

// conf is the node's network configuration with extra fields set.
func (n *node) conf(extra map[string]any) []byte {
	c := map[string]any{
		"cniVersion": n.version,
		"name":       "kubelab",
		"type":       "kubelab-cni",
		"bridge":     n.bridge,
		"subnet":     n.subnet,
		"dataDir":    n.dataDir,
	}
	for k, v := range extra {
		c[k] = v
	}
	b, err := json.Marshal(c)
	if err != nil {
		n.tb.Fatal(err)
	}
	return b
}

func (n *node) args(id string, pod ns.NetNS, conf []byte) *skel.CmdArgs {
	path := ""
	if pod != nil {
		path = pod.Path()
	}
	return &skel.CmdArgs{ContainerID: id, Netns: path, IfName: "eth0", StdinData: conf}
}

// call runs a verb of the plugin in-process inside the node's namespace.
func (n *node) call(verb func(*Plugin) func(*skel.CmdArgs) error, args *skel.CmdArgs) ([]byte, error) {
	var out bytes.Buffer
	p := New(Config{Stdout: &out, Logger: testLogger(n.tb)})
	err := n.ns.Do(func(ns.NetNS) error { return verb(p)(args) })
	return out.Bytes(), err
}

func (n *node) add(id string, pod ns.NetNS, conf []byte) (*types100.Result, error) {
	out, err := n.call(func(p *Plugin) func(*skel.CmdArgs) error { return p.Add }, n.args(id, pod, conf))
	if err != nil {
		return nil, err
	}
	return parseResult(n.tb, conf, out), nil
}

func (n *node) mustAdd(id string, pod ns.NetNS) *types100.Result {
	n.tb.Helper()
	r, err := n.add(id, pod, n.conf(nil))
	if err != nil {
		n.tb.Fatalf("ADD %s: %v", id, err)
	}
	return r
}

func (n *node) del(id string, pod ns.NetNS, conf []byte) error {
	_, err := n.call(func(p *Plugin) func(*skel.CmdArgs) error { return p.Del }, n.args(id, pod, conf))
	return err
}

func (n *node) check(id string, pod ns.NetNS, conf []byte) error {
	_, err := n.call(func(p *Plugin) func(*skel.CmdArgs) error { return p.Check }, n.args(id, pod, conf))
	return err
}

func parseResult(tb testing.TB, conf, out []byte) *types100.Result {
	tb.Helper()
	v, err := (&version.ConfigDecoder{}).Decode(conf)
	if err != nil {
		tb.Fatal(err)
	}
	r, err := version.NewResult(v, out)
	if err != nil {
		tb.Fatalf("result %s: %v", out, err)
	}
	r100, err := types100.GetResult(r)
	if err != nil {
		tb.Fatal(err)
	}
	return r100
}

// execPlugin runs the binary bin inside the namespace in with the CNI environment env
// and stdin; a CNI error printed by the plugin is returned as a *types.Error.
func execPlugin(in ns.NetNS, bin string, env map[string]string, stdin []byte) ([]byte, error) {
	var out []byte
	err := in.Do(func(ns.NetNS) error {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "CNI_PATH="+filepath.Dir(bin)+":/usr/lib/cni")
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stdin = bytes.NewReader(stdin)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		var err error
		out, err = cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			var cniErr types.Error
			if jerr := json.Unmarshal(out, &cniErr); jerr == nil && cniErr.Msg != "" {
				return &cniErr
			}
			return fmt.Errorf("%v: stdout %s stderr %s", err, out, stderr.String())
		}
		return err
	})
	return out, err
}

func cniEnv(command, id string, pod ns.NetNS) map[string]string {
	env := map[string]string{"CNI_COMMAND": command, "CNI_CONTAINERID": id, "CNI_IFNAME": "eth0"}
	if pod != nil {
		env["CNI_NETNS"] = pod.Path()
	}
	return env
}

// wantCode fails the test unless err is a CNI error of code whose message contains msg.
func wantCode(tb testing.TB, err error, code uint, msg string) {
	tb.Helper()
	var e *types.Error
	if !errors.As(err, &e) {
		tb.Fatalf("error %v (%T), want a CNI error of code %d", err, err, code)
	}
	if e.Code != code || !strings.Contains(e.Error(), msg) {
		tb.Fatalf("CNI error code %d %q, want code %d containing %q", e.Code, e.Error(), code, msg)
	}
}

// linkIn looks up a link in a namespace; nil if it does not exist.
func linkIn(tb testing.TB, in ns.NetNS, name string) netlink.Link {
	tb.Helper()
	var l netlink.Link
	err := in.Do(func(ns.NetNS) error {
		var err error
		l, err = netlink.LinkByName(name)
		if isNotFound(err) {
			l, err = nil, nil
		}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// serve accepts TCP connections on addr inside in and answers each with its name.
func serve(tb testing.TB, in ns.NetNS, addr, name string) {
	tb.Helper()
	var l net.Listener
	if err := in.Do(func(ns.NetNS) error {
		var err error
		l, err = net.Listen("tcp4", addr)
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = fmt.Fprintf(c, "%s %s", name, c.RemoteAddr())
			_ = c.Close()
		}
	}()
}

// dial connects to addr from inside in and returns what the server said.
func dial(in ns.NetNS, addr string) (string, error) {
	var c net.Conn
	if err := in.Do(func(ns.NetNS) error {
		var err error
		c, err = net.DialTimeout("tcp4", addr, 5*time.Second)
		return err
	}); err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	return string(b), err
}

// ipamFiles lists the allocation files of the node's store.
func (n *node) ipamFiles() []string {
	entries, err := os.ReadDir(n.dataDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		n.tb.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if net.ParseIP(e.Name()) != nil {
			files = append(files, e.Name())
		}
	}
	return files
}
