package containerd

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/moby/sys/mountinfo"
)

// containerdTools are the commands a test that starts containerd runs.
var containerdTools = []string{"containerd", "containerd-shim-runc-v2", "runc"}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func unique(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// instance is a Containerd run by a test.
type instance struct {
	*Containerd
	cancel context.CancelFunc
	done   chan error // Run's result
	pid    int        // the containerd that became ready first
}

// startInstance runs New(cfg).Run until the test ends (or stop), and waits for Ready.
func startInstance(t *testing.T, cfg Config) *instance {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{Containerd: c, cancel: cancel, done: make(chan error, 1)}
	go func() { in.done <- c.Run(ctx) }()
	t.Cleanup(func() { _ = in.stop() })
	select {
	case <-c.Ready():
	case err := <-in.done:
		in.done <- err
		t.Fatalf("Run returned before Ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatalf("containerd in %s not ready within 30s; log:\n%s", cfg.Dir, tail(c.p.logFile, 30))
	}
	in.pid = c.PID()
	return in
}

// stop ends Run (once) and returns its result.
func (in *instance) stop() error {
	in.cancel()
	select {
	case err := <-in.done:
		in.done <- err
		return err
	case <-time.After(2 * time.Minute):
		return errors.New("Run did not return within 2 minutes of its context's end")
	}
}

func (in *instance) client(t *testing.T) *Client {
	t.Helper()
	cl, err := Dial(in.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// assertTornDown checks that nothing of the instance at dir runs or is mounted: the
// containerd pids, its shims, the given other pids, its sockets (and their directory) and
// mounts.
func assertTornDown(t *testing.T, p paths, pids ...int) {
	t.Helper()
	if left := alive(pids); len(left) > 0 {
		t.Errorf("processes %v still run after teardown", left)
	}
	procs, err := listProcesses()
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range procs {
		if isShimOf(pr.args, p.socket) {
			t.Errorf("shim %d still runs after teardown: %q", pr.pid, pr.args)
		}
		if isContainerdOf(pr.args, "containerd", p.config) {
			t.Errorf("containerd %d still runs after teardown", pr.pid)
		}
	}
	for _, s := range []string{p.socket, p.ttrpcSocket, p.sockDir, p.pidFile} {
		if _, err := os.Lstat(s); !os.IsNotExist(err) {
			t.Errorf("%s is left after teardown (%v)", s, err)
		}
	}
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(p.dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		t.Errorf("%s (%s) is still mounted after teardown", m.Mountpoint, m.FSType)
	}
}

// testRegistry is an in-memory OCI registry on 127.0.0.1 that records the paths asked.
type testRegistry struct {
	addr string
	mu   sync.Mutex
	hits []string
}

func startRegistry(t *testing.T) *testRegistry {
	t.Helper()
	r := &testRegistry{}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.hits = append(r.hits, req.Method+" "+req.URL.Path)
		r.mu.Unlock()
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.addr = strings.TrimPrefix(srv.URL, "http://")
	return r
}

func (r *testRegistry) asked(method, path string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.hits {
		if h == method+" "+path {
			return true
		}
	}
	return false
}

// file is one entry of an image layer.
type file struct {
	name string
	mode int64
	body []byte
	dir  bool
}

// pushImage builds a one-layer linux/amd64 image of files with entrypoint and pushes it
// to repo:tag of the registry through the OCI distribution API.
func (r *testRegistry) pushImage(t *testing.T, repo, tag string, files []file, entrypoint []string) {
	t.Helper()
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	for _, f := range files {
		hdr := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.body)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
		if f.dir {
			hdr.Typeflag, hdr.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	var gzBuf bytes.Buffer
	gz := gzip.NewWriter(&gzBuf)
	if _, err := gz.Write(tarBuf.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	layer := gzBuf.Bytes()
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": entrypoint},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{digestOf(tarBuf.Bytes())}},
	})
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{
			"mediaType": "application/vnd.oci.image.config.v1+json",
			"digest":    digestOf(config), "size": len(config),
		},
		"layers": []any{map[string]any{
			"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
			"digest":    digestOf(layer), "size": len(layer),
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, blob := range [][]byte{layer, config} {
		u := fmt.Sprintf("http://%s/v2/%s/blobs/uploads/?digest=%s", r.addr, repo, digestOf(blob))
		r.put(t, http.MethodPost, u, "application/octet-stream", blob, http.StatusCreated)
	}
	u := fmt.Sprintf("http://%s/v2/%s/manifests/%s", r.addr, repo, tag)
	r.put(t, http.MethodPut, u, "application/vnd.oci.image.manifest.v1+json", manifest, http.StatusCreated)
}

func (r *testRegistry) put(t *testing.T, method, url, contentType string, body []byte, want int) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s: %s: %s", method, url, resp.Status, b)
	}
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// busyboxImage pushes an image holding the host's static busybox that runs
// `busybox sleep 3600` and returns its files' entrypoint.
func (r *testRegistry) pushBusybox(t *testing.T, repo, tag string) {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skipf("busybox-static is not installed: %v", err)
	}
	r.pushImage(t, repo, tag, []file{
		{name: "bin/", mode: 0o755, dir: true},
		{name: "bin/busybox", mode: 0o755, body: bb},
		{name: "tmp/", mode: 0o1777, dir: true},
	}, []string{"/bin/busybox", "sleep", "3600"})
}

// fakeCNI makes a CNI bin dir with a plugin that configures nothing but reports an
// address (so that pods get a network namespace without touching any network), records
// each call in the returned log, and Debian's loopback plugin (containerd calls it too).
// It writes a network config for it into confDir.
func fakeCNI(t *testing.T, binDir, confDir, name string) (callLog string) {
	t.Helper()
	loopback := filepath.Join(DefaultCNIBinDir, "loopback")
	if _, err := os.Stat(loopback); err != nil {
		t.Skipf("CNI plugins are not installed: %v", err)
	}
	callLog = filepath.Join(binDir, "calls.log")
	script := fmt.Sprintf(`#!/bin/sh
echo "$CNI_COMMAND $CNI_CONTAINERID $CNI_NETNS" >> %s
case "$CNI_COMMAND" in
ADD) printf '{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"%%s"}],"ips":[{"address":"10.254.0.2/24","interface":0}]}' "$CNI_NETNS" ;;
VERSION) printf '{"cniVersion":"1.0.0","supportedVersions":["0.3.0","0.3.1","0.4.0","1.0.0"]}' ;;
esac
`, callLog)
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(binDir, "kubelab-test-cni"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(loopback, filepath.Join(binDir, "loopback")); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":%q,"plugins":[{"type":"kubelab-test-cni"}]}`, name)
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "10-test.conflist"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return callLog
}
