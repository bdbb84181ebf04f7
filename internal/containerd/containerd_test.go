package containerd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/util/rundir"
)

// helperEnv makes the test binary run one instance (Config as JSON) instead of the tests;
// TestAdoptAfterKubelabKilled kills that process as kill -9 would kill kubelab.
const helperEnv = "KUBELAB_CONTAINERD_TEST_INSTANCE"

func TestMain(m *testing.M) {
	if raw := os.Getenv(helperEnv); raw != "" {
		os.Exit(runHelper(raw))
	}
	os.Exit(m.Run())
}

func runHelper(raw string) int {
	var cfg Config
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	c, err := New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	select {
	case <-c.Ready():
		fmt.Printf("ready %d\n", c.PID())
	case err := <-done:
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return map[bool]int{true: 1}[<-done != nil]
}

func criStatus(t *testing.T, cl *Client) map[string]bool {
	t.Helper()
	st, err := cl.Runtime.Status(ctxT(t, 10*time.Second), &runtimeapi.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, c := range st.Status.Conditions {
		out[c.Type] = c.Status
	}
	return out
}

func TestStartStop(t *testing.T) {
	testutil.RequireRoot(t, containerdTools...)
	dir := t.TempDir()
	in := startInstance(t, Config{Name: "n1", Dir: dir})
	if want := "unix://" + filepath.Join(rundir.For(dir), "containerd.sock"); in.Endpoint() != want {
		t.Errorf("Endpoint() = %q, want %q", in.Endpoint(), want)
	}
	cl := in.client(t)
	v, err := cl.Runtime.Version(ctxT(t, 10*time.Second), &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if v.RuntimeName != "containerd" || v.RuntimeApiVersion != "v1" {
		t.Errorf("Version = %+v, want containerd speaking v1", v)
	}
	st := criStatus(t, cl)
	if !st[runtimeapi.RuntimeReady] {
		t.Errorf("RuntimeReady is false: %v", st)
	}
	if st[runtimeapi.NetworkReady] {
		t.Errorf("NetworkReady is true with an empty CNI conf dir: %v", st)
	}
	pid := in.PID()
	if args, err := processArgs(pid); err != nil || !isContainerdOf(args, "containerd", filepath.Join(dir, "config.toml")) {
		t.Errorf("PID() %d runs %q (%v), not containerd with this instance's config", pid, args, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "containerd.pid")); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(pid) {
		t.Errorf("pid file holds %q (%v), want %d", b, err, pid)
	}
	// containerd is in a process group of its own, so a Ctrl-C to kubelab's group misses it.
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		t.Errorf("containerd's process group is %d (%v), want its own (%d)", pgid, err, pid)
	}

	// A second Run of the same dir refuses to start (and leaves the first alone).
	second, err := New(Config{Name: "n1", Dir: dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Run(ctxT(t, 10*time.Second)); err == nil || !strings.Contains(err.Error(), "locked") {
		t.Errorf("a second Run of the same dir = %v, want a locked error", err)
	}
	if !criStatus(t, cl)[runtimeapi.RuntimeReady] || in.PID() != pid {
		t.Error("the first instance suffered from the second Run")
	}

	if err := in.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	assertTornDown(t, in.p, pid)
	if in.PID() != 0 {
		t.Errorf("PID() = %d after Run returned", in.PID())
	}
	// Images and metadata stay for the next run.
	if _, err := os.Stat(filepath.Join(dir, "root", "io.containerd.metadata.v1.bolt", "meta.db")); err != nil {
		t.Errorf("metadata gone after teardown: %v", err)
	}
}

// TestEndsStaleContainerd: a containerd that an earlier run left (running this instance's
// config, named by the pid file or not) is ended before a new one starts.
func TestEndsStaleContainerd(t *testing.T) {
	testutil.RequireRoot(t, containerdTools...)
	for _, withPidFile := range []bool{true, false} {
		t.Run(fmt.Sprintf("pidfile=%v", withPidFile), func(t *testing.T) { testEndsStaleContainerd(t, withPidFile) })
	}
}

func testEndsStaleContainerd(t *testing.T, withPidFile bool) {
	dir := t.TempDir()
	first := startInstance(t, Config{Name: "n1", Dir: dir})
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	// A containerd as a killed kubelab could leave it (no parent-death signal here).
	stale := exec.Command("containerd", "--config", first.p.config)
	stale.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := stale.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = stale.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = stale.Process.Kill()
		<-exited
	})
	if withPidFile {
		if err := os.WriteFile(first.p.pidFile, []byte(strconv.Itoa(stale.Process.Pid)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	in := startInstance(t, Config{Name: "n1", Dir: dir})
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the stale containerd still runs after the new instance is ready")
	}
	if in.PID() == stale.Process.Pid {
		t.Fatal("the stale containerd was taken for the new one")
	}
	if err := in.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	assertTornDown(t, in.p, in.pid)
}

// TestLongDir: an instance whose Dir is 200 bytes long runs, with its sockets in the run
// directory of Dir, and its teardown removes that directory.
func TestLongDir(t *testing.T) {
	testutil.RequireRoot(t, containerdTools...)
	base := t.TempDir()
	dir := filepath.Join(base, strings.Repeat("x", 200-len(base)-len("/containerd")-1), "containerd")
	in := startInstance(t, Config{Name: "long", Dir: dir})
	if want := "unix://" + filepath.Join(rundir.For(dir), "containerd.sock"); in.Endpoint() != want {
		t.Fatalf("Endpoint() = %q, want %q", in.Endpoint(), want)
	}
	if _, err := in.client(t).Runtime.Version(ctxT(t, 10*time.Second), &runtimeapi.VersionRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := in.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	assertTornDown(t, in.p, in.pid)
}

func TestTwoInstances(t *testing.T) {
	testutil.RequireRoot(t, containerdTools...)
	a := startInstance(t, Config{Name: "a", Dir: t.TempDir()})
	b := startInstance(t, Config{Name: "b", Dir: t.TempDir()})
	if a.Endpoint() == b.Endpoint() || a.PID() == b.PID() {
		t.Fatalf("instances share an endpoint or a process: %s (%d), %s (%d)", a.Endpoint(), a.PID(), b.Endpoint(), b.PID())
	}
	ca, cb := a.client(t), b.client(t)
	for _, cl := range []*Client{ca, cb} {
		if !criStatus(t, cl)[runtimeapi.RuntimeReady] {
			t.Error("an instance is not RuntimeReady")
		}
	}
	if err := a.stop(); err != nil {
		t.Fatalf("Run a: %v", err)
	}
	assertTornDown(t, a.p, a.pid)
	// b is untouched by a's teardown.
	if !processRunning(b.pid) {
		t.Fatal("b's containerd died with a's teardown")
	}
	if _, err := cb.Runtime.Version(ctxT(t, 10*time.Second), &runtimeapi.VersionRequest{}); err != nil {
		t.Fatalf("b does not answer after a's teardown: %v", err)
	}
	if err := b.stop(); err != nil {
		t.Fatalf("Run b: %v", err)
	}
	assertTornDown(t, b.p, b.pid)
}

func TestRestartsKilledContainerd(t *testing.T) {
	testutil.RequireRoot(t, containerdTools...)
	in := startInstance(t, Config{Name: "n1", Dir: t.TempDir()})
	old := in.PID()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cl := in.client(t)
	testutil.EventuallyWithin(t, 30*time.Second, "a new containerd answers CRI", func() error {
		if pid := in.PID(); pid == 0 || pid == old {
			return fmt.Errorf("containerd pid is %d", pid)
		}
		return criReady(ctxT(t, 5*time.Second), cl)
	})
	newPID := in.PID()
	if err := in.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	assertTornDown(t, in.p, old, newPID)
}

func TestPullThroughMirror(t *testing.T) {
	testutil.RequireRoot(t, containerdTools...)
	reg := startRegistry(t)
	u := unique(t)
	name := "kubelab-test-" + u
	files := []file{{name: "hello", mode: 0o644, body: []byte("hello " + u)}}
	reg.pushImage(t, "library/"+name, "v1", files, []string{"/hello"}) // docker.io/library/<name>
	reg.pushImage(t, name, "v1", files, []string{"/hello"})            // registry.k8s.io/<name>
	reg.pushImage(t, "org/"+name, "v1", files, []string{"/hello"})     // any other registry

	in := startInstance(t, Config{Name: "n1", Dir: t.TempDir(), RegistryAddr: reg.addr})
	cl := in.client(t)
	for _, tc := range []struct{ ref, path string }{
		{"docker.io/library/" + name + ":v1", "/v2/library/" + name + "/manifests/v1"},
		{name + ":v1", "/v2/library/" + name + "/manifests/v1"},
		{"registry.k8s.io/" + name + ":v1", "/v2/" + name + "/manifests/v1"},
		{"quay.io/org/" + name + ":v1", "/v2/org/" + name + "/manifests/v1"},
	} {
		resp, err := cl.Image.PullImage(ctxT(t, 30*time.Second), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: tc.ref}})
		if err != nil {
			t.Errorf("PullImage(%s): %v", tc.ref, err)
			continue
		}
		if !reg.asked("HEAD", tc.path) && !reg.asked("GET", tc.path) {
			t.Errorf("PullImage(%s) did not ask the registry for %s", tc.ref, tc.path)
		}
		st, err := cl.Image.ImageStatus(ctxT(t, 10*time.Second), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: resp.ImageRef}})
		if err != nil || st.Image == nil {
			t.Errorf("ImageStatus(%s) = %v, %v; want the pulled image", resp.ImageRef, st, err)
		}
	}

	missing := "docker.io/library/" + name + "-missing:v1"
	_, err := cl.Image.PullImage(ctxT(t, 30*time.Second), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: missing}})
	if status.Code(err) != codes.NotFound || !strings.Contains(status.Convert(err).Message(), "not found") {
		t.Errorf("PullImage(%s) = %v, want a not-found error", missing, err)
	}
	if !reg.asked("HEAD", "/v2/library/"+name+"-missing/manifests/v1") {
		t.Errorf("PullImage(%s) did not ask the local registry", missing)
	}

	if err := in.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	assertTornDown(t, in.p, in.pid)
}

// podFixture is a registry with a busybox image, a fake CNI and an instance using both.
type podFixture struct {
	cfg     Config
	image   string // the busybox image, also the sandbox image
	cniLog  string
	netName string
	logDir  string
	// cgroupParent is the pod's cgroup parent, unique to the test.
	cgroupParent string
}

func newPodFixture(t *testing.T) *podFixture {
	t.Helper()
	reg := startRegistry(t)
	u := unique(t)
	reg.pushBusybox(t, "kubelab-test-busybox-"+u, "v1")
	f := &podFixture{image: "registry.k8s.io/kubelab-test-busybox-" + u + ":v1", netName: "kubelab-test-" + u, logDir: t.TempDir()}
	// The pod's cgroups go under a parent of the test's own (runc removes the pod's own
	// cgroups; the parent is removed here, after the instance's teardown).
	f.cgroupParent = "/kubelab-test-" + u
	t.Cleanup(func() {
		dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", f.cgroupParent))
		for _, d := range dirs {
			if err := os.Remove(d); err != nil {
				t.Errorf("remove cgroup %s: %v", d, err)
			}
		}
	})
	dir := t.TempDir()
	f.cfg = Config{
		Name:         "n1",
		Dir:          dir,
		RegistryAddr: reg.addr,
		SandboxImage: f.image,
		CNIBinDir:    filepath.Join(dir, "cni-bin"),
		CNIConfDir:   filepath.Join(dir, "cni", "net.d"),
	}
	f.cniLog = fakeCNI(t, f.cfg.CNIBinDir, f.cfg.CNIConfDir, f.netName)
	return f
}

// runPod starts a sandbox (own network namespace) with one sleeping container and returns
// the sandbox id and the pids of the sandbox's and the container's processes.
func (f *podFixture) runPod(t *testing.T, cl *Client) (sandboxID string, pids []int) {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: f.netName, Namespace: "default", Uid: f.netName},
		Hostname:     "pod",
		LogDirectory: f.logDir,
		Linux:        &runtimeapi.LinuxPodSandboxConfig{CgroupParent: f.cgroupParent},
	}
	sb, err := cl.Runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v; containerd's log ends:\n%s", err, tail(filepath.Join(f.cfg.Dir, "containerd.log"), 20))
	}
	if _, err := cl.Image.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: f.image}}); err != nil {
		t.Fatalf("PullImage: %v", err)
	}
	ctr, err := cl.Runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId:  sb.PodSandboxId,
		SandboxConfig: sbCfg,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "sleeper"},
			Image:    &runtimeapi.ImageSpec{Image: f.image},
			LogPath:  "sleeper.log",
			Linux:    &runtimeapi.LinuxContainerConfig{},
		},
	})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if _, err := cl.Runtime.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: ctr.ContainerId}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}

	sst, err := cl.Runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.PodSandboxId, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	if ip := sst.Status.GetNetwork().GetIp(); ip != "10.254.0.2" {
		t.Errorf("sandbox IP = %q, want the fake CNI's 10.254.0.2", ip)
	}
	cst, err := cl.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: ctr.ContainerId, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	for what, info := range map[string]string{"sandbox": sst.Info["info"], "container": cst.Info["info"]} {
		var v struct{ Pid int }
		if err := json.Unmarshal([]byte(info), &v); err != nil || v.Pid == 0 {
			t.Fatalf("no pid in the %s's verbose status (%v): %s", what, err, info)
		}
		if !processRunning(v.Pid) {
			t.Fatalf("the %s's process %d does not run", what, v.Pid)
		}
		pids = append(pids, v.Pid)
	}
	return sb.PodSandboxId, pids
}

// podState checks that the sandbox is ready with one running container.
func podState(ctx context.Context, cl *Client, sandboxID string) error {
	sbs, err := cl.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return err
	}
	if len(sbs.Items) != 1 || sbs.Items[0].Id != sandboxID || sbs.Items[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return fmt.Errorf("sandboxes = %v, want %s ready", sbs.Items, sandboxID)
	}
	ctrs, err := cl.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return err
	}
	if len(ctrs.Containers) != 1 || ctrs.Containers[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return fmt.Errorf("containers = %v, want one running", ctrs.Containers)
	}
	return nil
}

func shimsOf(t *testing.T, p paths) []int {
	t.Helper()
	procs, err := listProcesses()
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, pr := range procs {
		if isShimOf(pr.args, p.socket) {
			out = append(out, pr.pid)
		}
	}
	return out
}

func netnsMounts(t *testing.T, p paths) []string {
	t.Helper()
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(filepath.Join(p.state, "io.containerd.grpc.v1.cri", "netns")))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range mounts {
		out = append(out, m.Mountpoint)
	}
	return out
}

// assertCNIDeleted checks that the fake CNI plugin was called with DEL for the sandbox.
func assertCNIDeleted(t *testing.T, callLog, sandboxID string) {
	t.Helper()
	b, err := os.ReadFile(callLog)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "ADD "+sandboxID) || !strings.Contains(string(b), "DEL "+sandboxID) {
		t.Errorf("CNI calls lack ADD and DEL of sandbox %s:\n%s", sandboxID, b)
	}
}

func TestTeardownRemovesPods(t *testing.T) {
	testutil.RequireRoot(t, containerdTools...)
	f := newPodFixture(t)
	in := startInstance(t, f.cfg)
	cl := in.client(t)
	if !criStatus(t, cl)[runtimeapi.NetworkReady] {
		t.Error("NetworkReady is false with a CNI config in the conf dir")
	}
	sandboxID, pids := f.runPod(t, cl)
	shims := shimsOf(t, in.p)
	if len(shims) == 0 {
		t.Fatal("no shim runs with this instance's socket")
	}
	if len(netnsMounts(t, in.p)) != 1 {
		t.Errorf("netns mounts under state = %v, want the pod's one", netnsMounts(t, in.p))
	}

	// A containerd killed under Run comes back and finds the running pod again.
	old := in.PID()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 30*time.Second, "the restarted containerd lists the pod", func() error {
		if pid := in.PID(); pid == 0 || pid == old {
			return fmt.Errorf("containerd pid is %d", pid)
		}
		return podState(ctxT(t, 5*time.Second), cl, sandboxID)
	})
	if left := alive(pids); len(left) != len(pids) {
		t.Fatalf("pod processes %v died with containerd; alive: %v", pids, left)
	}

	if err := in.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	assertCNIDeleted(t, f.cniLog, sandboxID)
	assertTornDown(t, in.p, append(append(pids, shims...), old)...)
}

// killedKubelab runs the fixture's instance in a helper process, as kubelab would, starts a
// pod in it, and kills the helper (kill -9 of kubelab). It checks that the helper's
// containerd died with it (parent-death signal) while the pod and its shims run on, and
// returns a CRI client of the instance's endpoint, the sandbox id, the pod's and shims'
// pids and the dead containerd's pid. Whatever the test leaves is torn down at its end.
func killedKubelab(t *testing.T, f *podFixture) (cl *Client, sandboxID string, pids, shims []int, oldPID int) {
	t.Helper()
	raw, err := json.Marshal(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	helper := exec.Command(self, "-test.run=^$")
	helper.Env = append(os.Environ(), helperEnv+"="+string(raw))
	helper.Stderr = tWriter{t}
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = helper.Process.Kill()
		_ = helper.Wait()
		// Leave nothing behind even when the test failed before its own teardown.
		c, err := New(Config{Dir: f.cfg.Dir, CNIBinDir: f.cfg.CNIBinDir, CNIConfDir: f.cfg.CNIConfDir, SandboxImage: f.cfg.SandboxImage, Logger: testLogger(t)})
		if err == nil {
			_ = c.cleanupStale()
			_ = c.teardown(context.Background(), nil)
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("helper did not report ready: %v", err)
	}
	oldPID, err = strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "ready ")))
	if err != nil {
		t.Fatalf("helper said %q", line)
	}
	p := newPaths(f.cfg.Dir, rundir.For(f.cfg.Dir))
	cl, err = Dial("unix://" + p.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	sandboxID, pids = f.runPod(t, cl)
	shims = shimsOf(t, p)

	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	testutil.EventuallyWithin(t, 10*time.Second, "the killed kubelab's containerd is gone", func() error {
		if processRunning(oldPID) {
			return fmt.Errorf("containerd %d still runs", oldPID)
		}
		return nil
	})
	if left := alive(append(pids, shims...)); len(left) != len(pids)+len(shims) {
		t.Fatalf("pod processes and shims %v died with kubelab; alive: %v", append(pids, shims...), left)
	}
	return cl, sandboxID, pids, shims, oldPID
}

func TestAdoptAfterKubelabKilled(t *testing.T) {
	testutil.RequireRoot(t, containerdTools...)
	f := newPodFixture(t)
	cl, sandboxID, pids, shims, oldPID := killedKubelab(t, f)

	// The next run adopts the pod, and its teardown removes it.
	in := startInstance(t, f.cfg)
	if err := podState(ctxT(t, 10*time.Second), cl, sandboxID); err != nil {
		t.Fatalf("the new containerd did not adopt the pod: %v", err)
	}
	if err := in.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	assertCNIDeleted(t, f.cniLog, sandboxID)
	assertTornDown(t, in.p, append(append(pids, shims...), oldPID, in.pid)...)
}

// TestCleanupLeftoversByHand checks the last step of teardown alone: with containerd dead
// and no CRI to ask, the pod's processes, shims, shim sockets and mounts still go.
func TestCleanupLeftoversByHand(t *testing.T) {
	testutil.RequireRoot(t, containerdTools...)
	f := newPodFixture(t)
	_, sandboxID, pids, shims, oldPID := killedKubelab(t, f)
	// Without CNI DEL, libcni's cache entry of the pod stays: it is the test's to remove.
	t.Cleanup(func() {
		left, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", f.netName+"-"+sandboxID+"-*"))
		for _, l := range left {
			_ = os.Remove(l)
		}
	})

	c, err := New(Config{Dir: f.cfg.Dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	shimSockets := c.shimSockets()
	if len(shimSockets) == 0 {
		t.Fatal("the bundles name no shim socket")
	}
	if len(netnsMounts(t, c.p)) == 0 {
		t.Fatal("the pod's network namespace is not mounted before the cleanup")
	}
	if err := c.cleanupLeftovers(); err != nil {
		t.Fatalf("cleanupLeftovers: %v", err)
	}
	assertTornDown(t, c.p, append(append(pids, shims...), oldPID)...)
	for _, s := range shimSockets {
		if _, err := os.Lstat(s); !os.IsNotExist(err) {
			t.Errorf("shim socket %s is left (%v)", s, err)
		}
	}
}

// TestRunsInNetNS: with NetNS set, containerd runs in that network namespace; the caller's
// own is left as it was.
func TestRunsInNetNS(t *testing.T) {
	testutil.RequireRoot(t, containerdTools...)
	name := "kubelab-ctrd-test-" + unique(t)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v %s", name, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	path := filepath.Join("/run/netns", name)
	in := startInstance(t, Config{Name: "n1", Dir: t.TempDir(), NetNS: path})
	inode := func(p string) uint64 {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	if got, want := inode(fmt.Sprintf("/proc/%d/ns/net", in.PID())), inode(path); got != want {
		t.Errorf("containerd's network namespace is inode %d, want %s's %d", got, path, want)
	}
	for _, task := range tasks(t) { // every thread of this process stayed in its own
		if inode(task+"/ns/net") == inode(path) {
			t.Errorf("thread %s of the test process is in %s", task, path)
		}
	}
}

// TestNetNSMustBeAbsolute: a relative namespace path is refused by New.
func TestNetNSMustBeAbsolute(t *testing.T) {
	if _, err := New(Config{Dir: t.TempDir(), NetNS: "run/netns/x"}); err == nil || !strings.Contains(err.Error(), "run/netns/x") {
		t.Errorf("New with a relative NetNS: %v, want an error naming it", err)
	}
}

// tasks are the /proc paths of this process's threads.
func tasks(t *testing.T) []string {
	t.Helper()
	out, err := filepath.Glob("/proc/self/task/*")
	if err != nil || len(out) == 0 {
		t.Fatalf("list threads: %v", err)
	}
	return out
}
