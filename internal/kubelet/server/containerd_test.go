package server

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilexec "k8s.io/client-go/util/exec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelab/kubelab/internal/containerd"
	"github.com/kubelab/kubelab/internal/testutil"
)

// busyboxImage pushes an image of Debian's busybox-static (with the applets the test uses)
// to the registry at host, with the given entrypoint.
func busyboxImage(t *testing.T, host, repo string, entrypoint []string) string {
	t.Helper()
	bin, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skipf("busybox-static is needed for the test image: %v", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(0, 0)
	hdrs := []*tar.Header{{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime},
		{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin)), ModTime: mtime}}
	for _, h := range hdrs {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tw.Write(bin); err != nil {
		t.Fatal(err)
	}
	for _, applet := range []string{"sh", "sleep", "echo", "cat"} {
		if err := tw.WriteHeader(&tar.Header{Name: "bin/" + applet, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777, ModTime: mtime}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config = v1.Config{Entrypoint: entrypoint, Env: []string{"PATH=/bin"}}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	ref := host + "/" + repo + ":v1"
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	return ref
}

// TestContainerd serves logs, exec and port-forward of a container that containerd runs.
func TestContainerd(t *testing.T) {
	testutil.RequireRoot(t, "containerd", "containerd-shim-runc-v2", "runc")
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)

	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	host := strings.TrimPrefix(reg.URL, "http://")
	image := busyboxImage(t, host, "test/busybox", []string{"/bin/sh"})
	pause := busyboxImage(t, host, "test/pause", []string{"/bin/sleep", "3600"})

	// The pod's cgroups go under a parent of the test's own; runc removes the pod's, the
	// parent is removed after containerd's teardown.
	cgroupParent := "/kubelab-test-ks-" + id
	t.Cleanup(func() {
		dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", cgroupParent))
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("remove cgroup %s: %v", d, err)
			}
		}
	})
	dir := t.TempDir()
	cd, err := containerd.New(containerd.Config{Name: "ks-" + id, Dir: filepath.Join(dir, "containerd"), RegistryAddr: host,
		SandboxImage: pause, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Start(t, "containerd", time.Minute, cd.Run, testutil.Closed(cd.Ready()))
	cl, err := containerd.Dial(cd.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	call := func() context.Context {
		c, stop := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(stop)
		return c
	}

	// A host-network pod with one container that prints a line every 100 ms.
	logsDir := filepath.Join(dir, "pod-logs")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: types.UID("uid-" + id)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}}}
	hostNet := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_CONTAINER}
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID)},
		Labels:       map[string]string{labelPodUID: string(pod.UID)},
		LogDirectory: filepath.Join(logsDir, "default_web_"+string(pod.UID)),
		Linux: &runtimeapi.LinuxPodSandboxConfig{CgroupParent: cgroupParent,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: hostNet}},
	}
	if err := os.MkdirAll(sbCfg.LogDirectory, 0o755); err != nil {
		t.Fatal(err)
	}
	sb, err := cl.Runtime.RunPodSandbox(call(), &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Image.PullImage(call(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}}); err != nil {
		t.Fatal(err)
	}
	ctr, err := cl.Runtime.CreateContainer(call(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, SandboxConfig: sbCfg,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
			Image:    &runtimeapi.ImageSpec{Image: image},
			Command:  []string{"sh", "-c", `echo started; i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.1; done`},
			Labels:   map[string]string{labelPodUID: string(pod.UID), labelContainerName: "app"},
			LogPath:  "app/0.log",
			Linux:    &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: hostNet}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Runtime.StartContainer(call(), &runtimeapi.StartContainerRequest{ContainerId: ctr.ContainerId}); err != nil {
		t.Fatal(err)
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", ContainerID: "containerd://" + ctr.ContainerId,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}

	f := newFixtureWith(t, cl.Runtime, logsDir)
	f.pods["default/web"] = pod

	// Logs: the first line, then a followed log goes on as the container writes.
	testutil.Eventually(t, "the container's first line", func() bool {
		code, body := f.get("/containerLogs/default/web/app?limitBytes=8")
		return code == http.StatusOK && body == "started\n"
	})
	resp, err := f.client.Get(f.base + "/containerLogs/default/web/app?follow=true&tailLines=1")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	var ticks []int
	for len(ticks) < 3 && sc.Scan() {
		n, err := strconv.Atoi(strings.TrimPrefix(sc.Text(), "tick "))
		if err != nil {
			t.Fatalf("followed line %q", sc.Text())
		}
		ticks = append(ticks, n)
	}
	if len(ticks) != 3 || ticks[1] != ticks[0]+1 || ticks[2] != ticks[1]+1 {
		t.Errorf("followed ticks %v (%v)", ticks, sc.Err())
	}

	// Exec: output, stdin, exit codes.
	out, errOut, err := f.stream("/exec/default/web/app", execQuery(false, false, "echo", "hello", "from", "containerd"), nil, false)
	if err != nil || out != "hello from containerd\n" || errOut != "" {
		t.Errorf("exec echo: %q %q %v", out, errOut, err)
	}
	out, _, err = f.stream("/exec/default/web/app", execQuery(true, false, "cat"), strings.NewReader("through stdin"), false)
	if err != nil || out != "through stdin" {
		t.Errorf("exec cat: %q %v", out, err)
	}
	_, errOut, err = f.stream("/exec/default/web/app", execQuery(false, false, "sh", "-c", "echo oops >&2; exit 3"), nil, false)
	var exitErr utilexec.CodeExitError
	if !errors.As(err, &exitErr) || exitErr.Code != 3 || errOut != "oops\n" {
		t.Errorf("exec exit 3: %q %v", errOut, err)
	}
	out, _, err = f.stream("/exec/default/web/app", execQuery(false, true, "sh", "-c", "echo on a tty"), nil, true)
	if err != nil || out != "on a tty\r\n" {
		t.Errorf("exec with a tty: %q %v", out, err)
	}

	// Port-forward: the host-network pod's port is the host's.
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64)
				n, _ := c.Read(buf)
				_, _ = c.Write(bytes.ToUpper(buf[:n]))
			}()
		}
	}()
	f.portForwardEcho(t, "/portForward/default/web", l.Addr().(*net.TCPAddr).Port)

	// Stats: containerd's cgroup figures; a CPU rate from the second sample on.
	checkContainerdStats(t, f, string(pod.UID))

	// The container stops: the followed log ends.
	if _, err := cl.Runtime.StopContainer(call(), &runtimeapi.StopContainerRequest{ContainerId: ctr.ContainerId, Timeout: 1}); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, resp.Body)
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Error("the followed log did not end after the container stopped")
	}
	resp.Body.Close()
	if code, body := f.get("/exec/default/web/app?" + url.Values{"command": {"ls"}, "output": {"1"}}.Encode()); code != http.StatusBadRequest ||
		!strings.Contains(body, "is not running") {
		t.Errorf("exec into the stopped container: %d %s", code, body)
	}
}
