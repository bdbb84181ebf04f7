package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubelab/kubelab/internal/testutil"
)

func TestDefaultImages(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	r := startRegistry(t, dir)
	t.Logf("first start (build and push): %v", time.Since(start))
	addr := r.Addr()
	if host, _, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" {
		t.Fatalf("Addr() = %q, want 127.0.0.1:PORT", addr)
	}

	checkPlatform := func(t *testing.T, cf *v1.ConfigFile) {
		t.Helper()
		if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
			t.Errorf("platform = %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
		}
	}

	t.Run("pause", func(t *testing.T) {
		img := pull(t, addr, "pause:3.10")
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		checkPlatform(t, cf)
		if !slices.Equal(cf.Config.Entrypoint, []string{"/pause"}) {
			t.Errorf("Entrypoint = %q, want [/pause]", cf.Config.Entrypoint)
		}
		files := imageFiles(t, img)
		want, err := os.ReadFile(pauseBinary(t))
		if err != nil {
			t.Fatal(err)
		}
		f, ok := files["pause"]
		if !ok || f.typ != tar.TypeReg || f.mode&0o111 == 0 || !bytes.Equal(f.data, want) {
			t.Errorf("/pause = %+v (type %c), want the executable kubelab-pause (%d bytes)", f.mode, f.typ, len(want))
		}
	})

	t.Run("busybox", func(t *testing.T) {
		img := pull(t, addr, "library/busybox:latest")
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		checkPlatform(t, cf)
		if !slices.Equal(cf.Config.Cmd, []string{"sh"}) {
			t.Errorf("Cmd = %q, want [sh]", cf.Config.Cmd)
		}
		files := imageFiles(t, img)
		if f := files["bin/busybox"]; f.typ != tar.TypeReg || f.mode&0o111 == 0 {
			t.Errorf("bin/busybox = %+v, want an executable file", f)
		}
		// Every applet in /bin, as in upstream's busybox image (Debian's puts sysctl and ip in /sbin).
		for _, applet := range []string{"bin/sh", "bin/ls", "bin/df", "bin/cat", "bin/sysctl", "bin/ip"} {
			if f := files[applet]; f.typ != tar.TypeLink || f.link != "bin/busybox" || f.mode != files["bin/busybox"].mode {
				t.Errorf("%s = type %c link %q mode %o, want a hard link to bin/busybox with its mode", applet, f.typ, f.link, f.mode)
			}
		}
		if f := files["tmp"]; f.typ != tar.TypeDir || f.mode&0o1777 != 0o1777 {
			t.Errorf("tmp = type %c mode %o, want a directory 1777", f.typ, f.mode)
		}
		for _, want := range []string{"root:x:0:0:", "nobody:x:65534:65534:"} {
			if !strings.Contains(string(files["etc/passwd"].data), want) {
				t.Errorf("etc/passwd = %q, want a line %q…", files["etc/passwd"].data, want)
			}
		}
		if !strings.Contains(string(files["etc/group"].data), "nobody:x:65534:") {
			t.Errorf("etc/group = %q, want nobody", files["etc/group"].data)
		}
	})

	t.Run("nginx", func(t *testing.T) {
		img := pull(t, addr, "library/nginx:latest")
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		checkPlatform(t, cf)
		if !slices.Equal(cf.Config.Cmd, []string{"nginx", "-g", "daemon off;"}) {
			t.Errorf("Cmd = %q", cf.Config.Cmd)
		}
		if _, ok := cf.Config.ExposedPorts["80/tcp"]; !ok {
			t.Errorf("ExposedPorts = %v, want 80/tcp", cf.Config.ExposedPorts)
		}
		if !slices.ContainsFunc(cf.Config.Env, func(e string) bool { return strings.HasPrefix(e, "PATH=") && strings.Contains(e, "/usr/sbin") }) {
			t.Errorf("Env = %q, want a PATH with /usr/sbin", cf.Config.Env)
		}
		files := imageFiles(t, img)
		if f := files["usr/sbin/nginx"]; f.typ != tar.TypeReg || f.mode&0o111 == 0 {
			t.Errorf("usr/sbin/nginx = %+v, want an executable", f)
		}
		for p, target := range map[string]string{
			"var/log/nginx/access.log": "/dev/stdout",
			"var/log/nginx/error.log":  "/dev/stderr",
			"lib":                      "usr/lib",
			"bin":                      "usr/bin",
		} {
			if f := files[p]; f.typ != tar.TypeSymlink || f.link != target {
				t.Errorf("%s = type %c link %q, want a symbolic link to %s", p, f.typ, f.link, target)
			}
		}
		for _, p := range []string{
			"etc/nginx/mime.types", "etc/nginx/nginx.conf", "etc/nginx/conf.d/default.conf",
			"usr/share/nginx/html/index.html", "etc/nsswitch.conf", "etc/passwd", "etc/group",
		} {
			if f := files[p]; f.typ != tar.TypeReg {
				t.Errorf("%s missing (type %c)", p, f.typ)
			}
		}
		for _, p := range []string{"var/lib/nginx", "run", "tmp"} {
			if f := files[p]; f.typ != tar.TypeDir {
				t.Errorf("%s = type %c, want a directory", p, f.typ)
			}
		}
		if !strings.Contains(string(files["etc/passwd"].data), "www-data:x:33:33:") {
			t.Errorf("etc/passwd = %q, want www-data with uid 33", files["etc/passwd"].data)
		}
		// The libraries nginx links, reached through the merged-usr links, and the
		// NSS module that resolves www-data.
		var libs []string
		for p, f := range files {
			if strings.Contains(p, "/lib/") && f.typ == tar.TypeReg {
				libs = append(libs, filepath.Base(p))
			}
		}
		for _, prefix := range []string{"libc.so", "libssl.so", "libcrypto.so", "libpcre2-8.so", "libz.so", "libcrypt.so", "libnss_files.so", "ld-linux"} {
			if !slices.ContainsFunc(libs, func(l string) bool { return strings.HasPrefix(l, prefix) }) {
				t.Errorf("no %s* library in the image (have %v)", prefix, libs)
			}
		}
		if f := files["usr/bin/sh"]; f.typ != tar.TypeLink || f.link != "usr/bin/busybox" {
			t.Errorf("usr/bin/sh = type %c link %q, want busybox", f.typ, f.link)
		}
		if !strings.Contains(string(files["etc/nginx/conf.d/default.conf"].data), "root   /usr/share/nginx/html;") {
			t.Errorf("default server does not serve /usr/share/nginx/html:\n%s", files["etc/nginx/conf.d/default.conf"].data)
		}
		// Debian's nginx version is a tag of the same image.
		if v := nginxVersion(hostNginx); v != "" {
			tagged := pull(t, addr, "library/nginx:"+v)
			d1, _ := img.Digest()
			d2, _ := tagged.Digest()
			if d1 != d2 {
				t.Errorf("nginx:%s digest %s, nginx:latest %s", v, d2, d1)
			}
		}
	})

	// containerd asks through the mirror with ?ns=<registry>.
	t.Run("mirror request", func(t *testing.T) {
		for _, p := range []string{"/v2/library/nginx/manifests/latest?ns=docker.io", "/v2/pause/manifests/3.10?ns=registry.k8s.io"} {
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+p, nil)
			req.Header.Set("Accept", string(types.OCIManifestSchema1))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != string(types.OCIManifestSchema1) {
				t.Errorf("GET %s = %s %s, want 200 with an OCI manifest", p, resp.Status, resp.Header.Get("Content-Type"))
			}
		}
	})
}

// TestAddListener: the registry serves pulls on a listener handed to it before Run (of
// its own images and of upstream registries'), only pulls, and closes it when Run returns; one handed over while it runs is refused and
// closed.
func TestAddListener(t *testing.T) {
	extra, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hub := startStandIn(t, "", "")
	want := hub.push(t, "kubelab-test/app", "1")
	r := startRegistryWith(t, Config{Dir: t.TempDir(), Upstreams: map[string]string{"docker.io": hub.url()}}, extra)
	if extra.Addr().String() == r.Addr() {
		t.Fatalf("the extra listener has the registry's own address %s", r.Addr())
	}
	pull(t, extra.Addr().String(), "library/busybox:latest")
	// Pulls through containerd's mirror there get upstream's images too.
	if got, err := pullThroughMirror(extra.Addr().String(), "docker.io", "kubelab-test/app:1", "", ""); err != nil {
		t.Errorf("pull of an upstream image on the extra listener: %v", err)
	} else {
		sameDigest(t, got, want)
	}
	// Read-only there: an upload is refused, naming why.
	resp, err := http.Post("http://"+extra.Addr().String()+"/v2/library/busybox/blobs/uploads/", "application/octet-stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(string(body), "read-only") {
		t.Errorf("POST of an upload on the extra listener: %s %s, want 405 naming it read-only", resp.Status, body)
	}
	late, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.AddListener(late); err == nil {
		t.Error("AddListener while the registry runs succeeded, want an error")
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	for _, l := range []net.Listener{extra, late} {
		if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
			c.Close()
			t.Errorf("listener %s still accepts after Run returned", l.Addr())
		}
	}
}

func TestPortKeptAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	r1 := startRegistry(t, dir)
	addr := r1.Addr()
	b, err := os.ReadFile(AddrFile(dir))
	if err != nil || strings.TrimSpace(string(b)) != addr {
		t.Fatalf("%s = %q (%v), want %q", AddrFile(dir), b, err, addr)
	}
	if err := r1.stop(); err != nil {
		t.Fatalf("Run returned %v after its context ended, want nil", err)
	}

	start := time.Now()
	r2 := startRegistry(t, dir)
	t.Logf("second start (cached layers): %v", time.Since(start))
	if r2.Addr() != addr {
		t.Fatalf("after a restart Addr() = %s, want the recorded %s", r2.Addr(), addr)
	}
	pull(t, r2.Addr(), "library/busybox:latest")
	if err := r2.stop(); err != nil {
		t.Fatal(err)
	}

	// Someone else holds the recorded port: Run fails, naming the port and the file.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("hold %s: %v", addr, err)
	}
	defer ln.Close()
	_, errc := startRegistryAsync(t, dir)
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), AddrFile(dir)) {
			t.Fatalf("Run with the recorded port taken = %v, want an error naming %s and %s", err, addr, AddrFile(dir))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not fail with its port taken")
	}
}

func TestCachedLayersAreNotRebuilt(t *testing.T) {
	dir := t.TempDir()
	r1 := startRegistry(t, dir)
	before := blobStats(t, dir)
	if len(before) < 3 {
		t.Fatalf("blob store has %d blobs after a start, want the layers of 3 images", len(before))
	}
	if err := r1.stop(); err != nil {
		t.Fatal(err)
	}
	r2 := startRegistry(t, dir)
	after := blobStats(t, dir)
	for p, fi := range before {
		if a, ok := after[p]; !ok || !os.SameFile(a, fi) || !a.ModTime().Equal(fi.ModTime()) {
			t.Errorf("blob %s was rewritten by the second start", filepath.Base(p))
		}
	}
	if len(after) != len(before) {
		t.Errorf("second start left %d blobs, the first %d", len(after), len(before))
	}
	pull(t, r2.Addr(), "library/nginx:latest")
}

func blobStats(t *testing.T, dir string) map[string]os.FileInfo {
	t.Helper()
	out := map[string]os.FileInfo{}
	matches, err := filepath.Glob(filepath.Join(LayoutDir(dir), "blobs", "sha256", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range matches {
		if strings.HasPrefix(filepath.Base(m), ".") {
			continue
		}
		fi, err := os.Stat(m)
		if err != nil {
			t.Fatal(err)
		}
		out[m] = fi
	}
	return out
}

func TestStableDigests(t *testing.T) {
	digests := func(dir string) map[string]v1.Hash {
		r := startRegistry(t, dir)
		out := map[string]v1.Hash{}
		for _, p := range []string{"pause:3.10", "library/busybox:latest", "library/nginx:latest"} {
			d, err := pull(t, r.Addr(), p).Digest()
			if err != nil {
				t.Fatal(err)
			}
			out[p] = d
		}
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, b := digests(t.TempDir()), digests(t.TempDir())
	for p, d := range a {
		if b[p] != d {
			t.Errorf("%s: digest %s in one build, %s in another", p, d, b[p])
		}
	}
}

func TestConfigValidation(t *testing.T) {
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "dir") {
		t.Errorf("New without Dir = %v, want an error about dir", err)
	}
	r, err := New(Config{Dir: t.TempDir(), PauseBinary: pauseBinary(t)})
	if err != nil {
		t.Fatal(err)
	}
	if r.cfg.Addr != "127.0.0.1:0" {
		t.Errorf("default Addr = %q, want 127.0.0.1:0", r.cfg.Addr)
	}
	// A missing pause binary is a clear error from Run, not a broken image.
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such-pause")
	reg, err := New(Config{Dir: dir, PauseBinary: missing, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := contextWithTimeout(t, 30*time.Second)
	defer cancel()
	if err := reg.Run(ctx); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("Run with a missing pause binary = %v, want an error naming %s", err, missing)
	}
}

// TestKubelabImage: with a kubelab binary the registry serves kubelab.dev/kubelab:latest,
// whose entrypoint is that binary, and in which the binary and the CSI node plugin's
// volume tools run (their libraries are all there). /usr/bin/env stands in for kubelab.
func TestKubelabImage(t *testing.T) {
	testutil.RequireRoot(t)
	reg := startRegistryWith(t, Config{Dir: t.TempDir(), KubelabBinary: "/usr/bin/env"})
	img := pull(t, reg.Addr(), "kubelab:latest")
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config.Entrypoint; len(got) != 1 || got[0] != "/usr/bin/kubelab" {
		t.Errorf("entrypoint %q, want [/usr/bin/kubelab]", got)
	}
	root := t.TempDir()
	extractImage(t, img, root)
	for _, args := range [][]string{
		{"/usr/bin/kubelab", "--version"}, {"mkfs.ext4", "-V"}, {"mkfs.xfs", "-V"}, {"blkid", "--version"},
		{"mount", "--version"}, {"umount", "--version"}, {"fsck", "--version"}, {"e2fsck", "-V"}, {"resize2fs", "-P", "/dev/null"},
		{"xfs_repair", "-V"}, {"xfs_growfs", "-V"}, {"xfs_io", "-V"}, {"sh", "-c", "true"}, {"fsck.xfs"},
	} {
		cmd := exec.Command("chroot", append([]string{root}, args...)...)
		cmd.Env = []string{"PATH=" + defaultPath}
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		// chroot exits 127 for a command it does not find, 126 for one it cannot run;
		// the loader names a missing library.
		if (errors.As(err, &exit) && exit.ExitCode() >= 126) || (err != nil && exit == nil) ||
			strings.Contains(string(out), "error while loading shared libraries") {
			t.Errorf("%s in the image: %v\n%s", args[0], err, out)
		}
	}
}
