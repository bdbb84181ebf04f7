package image

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubelab/kubelab/internal/testutil"
)

func contextWithTimeout(t *testing.T, d time.Duration) (context.Context, context.CancelFunc) {
	t.Helper()
	return context.WithTimeout(context.Background(), d)
}

// TestImagesRunInChroot extracts the images' filesystems and runs their programs in
// them: nginx checks its configuration (every library and config file it needs is
// there), busybox's shell runs, and nginx serves index.html on port 80 in a network
// namespace of its own.
func TestImagesRunInChroot(t *testing.T) {
	testutil.RequireRoot(t, "chroot", "unshare")
	r := startRegistry(t, t.TempDir())

	nginxRoot := t.TempDir()
	extractImage(t, pull(t, r.Addr(), "library/nginx:latest"), nginxRoot)
	// The runtime gives a container its /dev; here the logs' targets are plain files.
	if err := os.MkdirAll(filepath.Join(nginxRoot, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"stdout", "stderr", "null"} {
		if err := os.WriteFile(filepath.Join(nginxRoot, "dev", f), nil, 0o666); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("nginx -t", func(t *testing.T) {
		out, err := exec.Command("chroot", nginxRoot, "/usr/sbin/nginx", "-t").CombinedOutput()
		if err != nil {
			t.Fatalf("chroot nginx -t: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "test is successful") {
			t.Fatalf("nginx -t said:\n%s", out)
		}
	})

	t.Run("nginx image shell", func(t *testing.T) {
		out, err := exec.Command("chroot", nginxRoot, "/bin/sh", "-c", "echo hi > /tmp/x && cat /tmp/x && id -u www-data").CombinedOutput()
		if err != nil || string(out) != "hi\n33\n" {
			t.Fatalf("chroot sh = %q, %v; want hi and www-data's uid 33", out, err)
		}
	})

	t.Run("busybox sh", func(t *testing.T) {
		root := t.TempDir()
		extractImage(t, pull(t, r.Addr(), "library/busybox:latest"), root)
		out, err := exec.Command("chroot", root, "/bin/sh", "-c", "echo ok").CombinedOutput()
		if err != nil || string(out) != "ok\n" {
			t.Fatalf("chroot /bin/sh -c 'echo ok' = %q, %v", out, err)
		}
	})

	t.Run("nginx serves index.html on port 80", func(t *testing.T) {
		if _, err := exec.LookPath("unshare"); err != nil {
			t.Skip("needs unshare for a network and PID namespace")
		}
		// A new PID namespace: when the shell ends, the kernel ends nginx too.
		script := `ip link set lo up || exit 1
nginx -g 'daemon off;' &
i=0
while [ $i -lt 100 ]; do
	if wget -q -O - http://127.0.0.1:80/ 2>/dev/null; then exit 0; fi
	i=$((i+1)); sleep 0.1
done
echo "nginx never answered" >&2
exit 1`
		ctx, cancel := contextWithTimeout(t, 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "unshare", "--net", "--pid", "--fork", "--kill-child",
			"chroot", nginxRoot, "/bin/sh", "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("serve: %v\n%s", err, out)
		}
		want, err := os.ReadFile(filepath.Join(nginxRoot, "usr/share/nginx/html/index.html"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), string(want)) {
			t.Fatalf("GET / = %q, want index.html", out)
		}
	})
}

func TestLibraryClosure(t *testing.T) {
	libs, err := libraryClosure([]string{hostNginx}, []string{"libnss_files.so.2"})
	if err != nil {
		t.Fatal(err)
	}
	// The closure includes the interpreter and libraries needed only indirectly.
	var names []string
	for _, l := range libs {
		names = append(names, filepath.Base(l))
	}
	for _, want := range []string{"ld-linux", "libc.so.6", "libssl.so.3", "libcrypto.so.3", "libnss_files.so.2"} {
		if !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, want) }) {
			t.Errorf("closure %v lacks %s", names, want)
		}
	}
	if _, err := libraryClosure([]string{"/etc/hostname"}, nil); err == nil {
		t.Error("libraryClosure of a non-ELF file succeeded")
	}
	if _, err := findLibrary("libkubelab-does-not-exist.so.1", nil, 0, 0); err == nil || !strings.Contains(err.Error(), "libkubelab-does-not-exist.so.1") {
		t.Errorf("findLibrary of a missing library = %v, want an error naming it", err)
	}
}

func TestLayerSpecRejectsPathsThroughLinks(t *testing.T) {
	s := newLayerSpec()
	s.symlink("lib", "usr/lib")
	s.file("lib/x", 0o644, []byte("x"))
	if err := s.writeTar(&strings.Builder{}); err == nil {
		t.Error("a file under a symbolic link of the layer was accepted")
	}
	if got := s.resolve("lib/y/z"); got != "usr/lib/y/z" {
		t.Errorf("resolve(lib/y/z) = %q, want usr/lib/y/z", got)
	}
	s2 := newLayerSpec()
	s2.hardlink("bin/sh", "bin/busybox")
	if err := s2.writeTar(&strings.Builder{}); err == nil {
		t.Error("a hard link to a missing file was accepted")
	}
}
