package rundir

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kubelab/kubelab/internal/testutil"
)

// TestForIsShortStableAndDistinct: the run directory of a 200-character dir is as short
// as any other's, the same at every call, and not another dir's.
func TestForIsShortStableAndDistinct(t *testing.T) {
	long := "/tmp/" + strings.Repeat("d", 195)
	short := "/tmp/kl"
	got := For(long)
	if len(got) != len(For(short)) || len(got) != len(Root())+1+8 {
		t.Errorf("For(200 chars) = %q, For(%s) = %q: want both %d bytes long", got, short, For(short), len(Root())+9)
	}
	if !strings.HasPrefix(got, Root()+"/") {
		t.Errorf("For = %q, want a directory of %s", got, Root())
	}
	if For(long) != got || For(long+"/") != got {
		t.Errorf("For is not stable: %q, then %q and %q", got, For(long), For(long+"/"))
	}
	if For(long+"x") == got {
		t.Errorf("two dirs share the run dir %q", got)
	}
	if err := CheckSocket(filepath.Join(got, "ip-172-31-255-255.ec2.internal", "plugins_registry", "ebs.csi.aws.com-reg.sock")); err != nil {
		t.Errorf("the longest node socket does not fit: %v", err)
	}
	if err := CheckSocket("/" + strings.Repeat("s", MaxSocketPath)); err == nil {
		t.Errorf("CheckSocket accepts a %d-byte path", MaxSocketPath+1)
	}
}

// listen binds a unix socket at path, closed (and so removed) at the end unless gone.
func listen(t *testing.T, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	t.Cleanup(func() { l.Close() })
}

// TestLinkAndRemove: Link makes the run dir and a link to it, replaces a directory of
// stale sockets an earlier run left, and refuses one holding anything else; Remove takes
// the run dir with its sockets and directories, but never through a mount.
func TestLinkAndRemove(t *testing.T) {
	testutil.RequireRoot(t)
	data := t.TempDir()
	run := For(data)
	t.Cleanup(func() { os.RemoveAll(run) })
	target := filepath.Join(run, "n1", "plugins_registry")
	link := filepath.Join(data, "nodes", "n1", "kubelet", "plugins_registry")

	// An earlier kubelab's dir with a stale socket in it.
	if err := os.MkdirAll(link, 0o750); err != nil {
		t.Fatal(err)
	}
	listen(t, filepath.Join(link, "old-reg.sock"))
	for range 2 { // and again, when the link is there
		if err := Link(link, target); err != nil {
			t.Fatal(err)
		}
		if got, err := os.Readlink(link); err != nil || got != target {
			t.Fatalf("%s links to %q (%v), want %s", link, got, err, target)
		}
	}
	listen(t, filepath.Join(target, "x-reg.sock"))
	if fi, err := os.Stat(filepath.Join(link, "x-reg.sock")); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("the socket in the run dir is not seen through the link: %v", err)
	}

	other := filepath.Join(data, "other")
	if err := os.MkdirAll(other, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Link(other, filepath.Join(run, "other")); err == nil {
		t.Error("Link replaced a directory holding a file")
	}
	if _, err := os.Stat(filepath.Join(other, "keep")); err != nil {
		t.Errorf("Link removed what it refused to replace: %v", err)
	}

	if err := Remove(data); err == nil {
		t.Errorf("Remove(%s) accepted a dir outside %s", data, Root())
	}
	mnt := filepath.Join(run, "mnt")
	if err := os.MkdirAll(mnt, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	if err := Remove(run); err == nil || !strings.Contains(err.Error(), mnt) {
		t.Errorf("Remove with %s mounted: %v, want an error naming it", mnt, err)
	}
	if _, err := os.Stat(filepath.Join(target, "x-reg.sock")); err != nil {
		t.Errorf("Remove refused, yet removed: %v", err)
	}
	if err := unix.Unmount(mnt, 0); err != nil {
		t.Fatal(err)
	}
	if err := Remove(run); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(run); !os.IsNotExist(err) {
		t.Errorf("run dir %s still there after Remove: %v", run, err)
	}
}
