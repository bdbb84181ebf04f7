package app

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

// buildKubelab builds kubelab and kubelab-pause into a temporary dir and returns
// kubelab's path.
func buildKubelab(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, pkg := range []string{"cmd/kubelab", "cmd/kubelab-pause"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, filepath.Base(pkg)), "github.com/kubelab/kubelab/"+pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, out)
		}
	}
	return filepath.Join(dir, "kubelab")
}

// upProcess is a `kubelab up` run as its own process.
type upProcess struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

// startUpProcess runs bin up with args and waits until it says it is up.
func startUpProcess(t *testing.T, bin string, args ...string) *upProcess {
	t.Helper()
	p := &upProcess{cmd: exec.Command(bin, append([]string{"up"}, args...)...), out: &syncBuffer{}, done: make(chan error, 1)}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { // a test that failed midway: end it as Ctrl-C would
		select {
		case <-p.done:
		default:
			p.cmd.Process.Signal(os.Interrupt)
			select {
			case <-p.done:
			case <-time.After(2 * time.Minute):
				t.Errorf("kubelab up (pid %d) did not stop", p.cmd.Process.Pid)
			}
		}
	})
	deadline := time.After(3 * time.Minute)
	for !strings.Contains(p.out.String(), "kubelab is up.") {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("kubelab up exited (%v) before it was up:\n%s", err, p.out.String())
		case <-deadline:
			t.Fatalf("kubelab up not up after 3 minutes:\n%s", p.out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return p
}

// TestUpRealKill9 kills `kubelab up` with real nodes with -9 while the seed's pod runs
// with its volume mounted, starts it again on the same data dir and checks that the pod
// is Running again with nothing mounted twice; a second `up` on the data dir in use is
// refused naming the holder; `kubelab down` then stops it and nothing is left on the
// machine: no mount, loop device or process of the data dir.
func TestUpRealKill9(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("real nodes need root")
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed: this test drives `kubelab up` with the real kubectl")
	}
	if _, err := exec.LookPath("containerd"); err != nil {
		t.Skip("containerd is not installed (hack/setup.sh installs it)")
	}
	bin := buildKubelab(t)
	dir, err := os.MkdirTemp("", "kl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Cleanup(func() { assertDataDirReleased(t, dir) })
	args := func() []string {
		return []string{"--data-dir", dir, "--nodes", "1", "--zones", "us-east-1a", "--secure-port", "0",
			"--etcd-client-port", fmt.Sprint(apiservertest.FreePort(t)), "--etcd-peer-port", fmt.Sprint(apiservertest.FreePort(t))}
	}
	kc := filepath.Join(dir, "kubeconfig")
	run := func(args ...string) string {
		t.Helper()
		b, err := exec.Command(kubectl, append([]string{"--kubeconfig", kc}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return string(b)
	}
	first := startUpProcess(t, bin, args()...)
	seed := filepath.Join("..", "..", "examples", "seed")
	run("apply", "-f", filepath.Join(seed, "10-pvc.yaml"), "-f", filepath.Join(seed, "20-pod.yaml"))
	run("wait", "--for=condition=Ready", "pod/my-app-pod", "--timeout=120s")
	before := mountCounts(t, dir)
	if len(before) < 2 {
		t.Fatalf("mounts under %s with the pod running: %v, want its global mount and its pod mount", dir, before)
	}

	// A second up on the data dir in use is refused, naming the holder.
	out, err := exec.Command(bin, append([]string{"up"}, args()...)...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), fmt.Sprintf("in use by kubelab up (pid %d)", first.cmd.Process.Pid)) {
		t.Errorf("second up on a data dir in use: %v\n%s", err, out)
	}

	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.done
	first.done <- nil

	second := startUpProcess(t, bin, args()...)
	run("wait", "--for=condition=Ready", "pod/my-app-pod", "--timeout=120s")
	after := mountCounts(t, dir)
	for mp, n := range after {
		if n != 1 {
			t.Errorf("%s mounted %d times after the restart", mp, n)
		}
	}
	for mp := range before {
		if after[mp] == 0 {
			t.Errorf("%s no longer mounted after the restart", mp)
		}
	}

	// The node as seen from on it: its containerd's pods and containers, its kubelet dir.
	node := run("get", "pod", "my-app-pod", "-o", "jsonpath={.spec.nodeName}")
	out, err = exec.Command(bin, "node", "ps", node, "--data-dir", dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "default/my-app-pod") || !regexp.MustCompile(`RUNNING\s+my-container`).Match(out) {
		t.Errorf("kubelab node ps %s: %v\n%s", node, err, out)
	}
	out, err = exec.Command(bin, "node", "shell", node, "--data-dir", dir, "--", "sh", "-c", "pwd; ls plugins_registry; ctr containers ls -q | wc -l").CombinedOutput()
	lines := strings.Fields(string(out))
	if err != nil || len(lines) != 3 || lines[0] != filepath.Join(dir, "nodes", node, "kubelet") || lines[1] != "ebs.csi.aws.com-reg.sock" || lines[2] == "0" {
		t.Errorf("kubelab node shell %s: %v\n%s", node, err, out)
	}

	out, err = exec.Command(bin, "down", "--data-dir", dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "kubelab is down") {
		t.Fatalf("kubelab down: %v\n%s", err, out)
	}
	select {
	case err := <-second.done:
		second.done <- err
		if err != nil {
			t.Errorf("kubelab up ended with %v after down:\n%s", err, second.out.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("kubelab up still runs after down said it is down")
	}
}

// mountCounts counts the mounts at each mount point under dir.
func mountCounts(t *testing.T, dir string) map[string]int {
	t.Helper()
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, m := range ms {
		out[m.Mountpoint]++
	}
	return out
}

// assertDataDirReleased checks that nothing of the cluster on dir is left on the machine.
func assertDataDirReleased(t *testing.T, dir string) {
	t.Helper()
	for mp := range mountCounts(t, dir) {
		t.Errorf("left mounted: %s", mp)
	}
	loops, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range loops {
		if b, err := os.ReadFile(f); err == nil && strings.HasPrefix(string(b), dir) {
			t.Errorf("loop device left: %s → %s", f, strings.TrimSpace(string(b)))
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte(dir)) {
			t.Errorf("process left: %s: %s", f, bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
}
