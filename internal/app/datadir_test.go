package app

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// The default data dir: $KUBELAB_DATA_DIR when set; root's /var/lib/kubelab; a user's
// own under $XDG_DATA_HOME (absolute only), else under ~/.local/share.
func TestDefaultDataDir(t *testing.T) {
	for _, c := range []struct {
		name string
		euid int
		env  map[string]string
		want string
	}{
		{"root", 0, map[string]string{"HOME": "/root", "XDG_DATA_HOME": "/root/.data"}, "/var/lib/kubelab"},
		{"root with KUBELAB_DATA_DIR", 0, map[string]string{"KUBELAB_DATA_DIR": "/srv/kl"}, "/srv/kl"},
		{"user", 1000, map[string]string{"HOME": "/home/ann"}, "/home/ann/.local/share/kubelab"},
		{"user with XDG_DATA_HOME", 1000, map[string]string{"HOME": "/home/ann", "XDG_DATA_HOME": "/home/ann/data"}, "/home/ann/data/kubelab"},
		{"user with a relative XDG_DATA_HOME", 1000, map[string]string{"HOME": "/home/ann", "XDG_DATA_HOME": "data"}, "/home/ann/.local/share/kubelab"},
		{"user with KUBELAB_DATA_DIR", 1000, map[string]string{"HOME": "/home/ann", "KUBELAB_DATA_DIR": "/tmp/kl"}, "/tmp/kl"},
		{"user without a home", 1000, nil, "/var/lib/kubelab"},
	} {
		if got := defaultDataDir(c.euid, func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("%s: default data dir %q, want %q", c.name, got, c.want)
		}
	}
}

// Real nodes need root; hollow ones do not.
func TestNeedsRoot(t *testing.T) {
	if needsRoot(false, 0) != nil || needsRoot(true, 0) != nil || needsRoot(true, 1000) != nil {
		t.Error("needsRoot refuses root, or a user with --hollow")
	}
	err := needsRoot(false, 1000)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "as root") || !strings.Contains(err.Error(), "--hollow") {
		t.Errorf("needsRoot for a user without --hollow: %v, want one line naming root and --hollow", err)
	}
}

// TestUpWithoutRoot runs the kubelab binary as the user nobody, with a home of its own:
// `kubelab up` (real nodes) fails at once with one line saying how to run it; `kubelab up
// --hollow` keeps its state in ~/.local/share/kubelab, where `kubelab kubectl` and
// `kubelab down` find it.
func TestUpWithoutRoot(t *testing.T) {
	testutil.RequireRoot(t)
	bin := filepath.Join(testutil.Commands(t), "kubelab")
	base, err := os.MkdirTemp("", "kl-user")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	const nobody = 65534
	home := filepath.Join(base, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil { // nobody passes through to its home
		t.Fatal(err)
	}
	asNobody := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
		cmd.Dir = home
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		return cmd
	}

	var stdout, stderr strings.Builder
	cmd := asNobody("up")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err == nil || stdout.Len() > 0 || strings.Count(stderr.String(), "\n") != 1 ||
		!strings.Contains(stderr.String(), "as root") || !strings.Contains(stderr.String(), "--hollow") {
		t.Errorf("kubelab up without root: %v, stdout %q, stderr %q; want it to fail with one line naming root and --hollow", err, stdout.String(), stderr.String())
	}

	dataDir := filepath.Join(home, ".local", "share", "kubelab")
	up := startUpCommand(t, asNobody("up", "--hollow", "--nodes", "1", "--secure-port", "0",
		"--etcd-client-port", fmt.Sprint(apiservertest.FreePort(t)), "--etcd-peer-port", fmt.Sprint(apiservertest.FreePort(t))))
	if !strings.Contains(up.out.String(), filepath.Join(dataDir, "kubeconfig")) {
		t.Errorf("kubelab up --hollow as nobody does not name a kubeconfig in %s:\n%s", dataDir, up.out.String())
	}
	if b, err := asNobody("kubectl", "get", "nodes", "-o", "name").CombinedOutput(); err != nil || !strings.HasPrefix(string(b), "node/") {
		t.Errorf("kubelab kubectl get nodes as nobody: %v\n%s", err, b)
	}
	if b, err := asNobody("down").CombinedOutput(); err != nil || !strings.Contains(string(b), "kubelab is down") {
		t.Errorf("kubelab down as nobody: %v\n%s", err, b)
	}
	select {
	case err := <-up.done:
		up.done <- err
		if err != nil {
			t.Errorf("kubelab up --hollow as nobody ended with %v after down:\n%s", err, up.out.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("kubelab up --hollow as nobody still runs after down said it is down")
	}
}
