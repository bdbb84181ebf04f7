package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

// runUp runs `kubelab up` with args until the test ends it; it returns once the
// cluster printed that it is up, with its output so far and a stop function.
func runUp(t *testing.T, args ...string) (out *syncBuffer, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, errOut := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- Run(ctx, append([]string{"up"}, args...), out, errOut) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("kubelab up returned %v\nstderr:\n%s", err, errOut.String())
			}
		case <-time.After(time.Minute):
			t.Errorf("kubelab up did not stop within a minute")
		}
	}
	t.Cleanup(stop)
	deadline := time.After(3 * time.Minute)
	for !strings.Contains(out.String(), "kubelab is up.") {
		select {
		case err := <-done:
			stopped = true
			t.Fatalf("kubelab up returned %v before it was up\nstderr:\n%s", err, errOut.String())
		case <-deadline:
			t.Fatalf("kubelab up not up after 3 minutes\nstdout:\n%s", out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return out, stop
}

// TestUpHollow runs `kubelab up --hollow --nodes 4` and drives it with the real kubectl:
// four nodes over three zones, the manifests of examples/seed applied, their pod
// Running with its claim Bound. A second `up` on the same data dir finds the same
// nodes (their instances are not launched again) and the pod still there.
func TestUpHollow(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed: this test drives `kubelab up` with the real kubectl")
	}
	dir := t.TempDir()
	args := []string{"--hollow", "--nodes", "4", "--data-dir", dir, "--secure-port", "0",
		"--etcd-client-port", fmt.Sprint(apiservertest.FreePort(t)), "--etcd-peer-port", fmt.Sprint(apiservertest.FreePort(t))}
	out, stop := runUp(t, args...)
	kc := filepath.Join(dir, "kubeconfig")
	if !strings.Contains(out.String(), kc) {
		t.Errorf("kubelab up did not print its kubeconfig %s:\n%s", kc, out.String())
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kc}, args...)...)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return string(b)
	}
	nodes := run("get", "nodes", "-o", "jsonpath={range .items[*]}{.metadata.name} {.metadata.labels.topology\\.kubernetes\\.io/zone} {.spec.providerID}{\"\\n\"}{end}")
	lines := strings.Split(strings.TrimSpace(nodes), "\n")
	zones := map[string]int{}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 3 || !strings.HasSuffix(f[0], ".ec2.internal") || !strings.HasPrefix(f[2], "aws:///"+f[1]+"/i-") {
			t.Errorf("node line %q: want <ip-…ec2.internal> <zone> aws:///<zone>/i-…", l)
			continue
		}
		zones[f[1]]++
	}
	if len(lines) != 4 || len(zones) != 3 {
		t.Fatalf("nodes:\n%s\nwant 4 over 3 zones", nodes)
	}
	if got := run("get", "storageclass", "gp2", "-o", "jsonpath={.metadata.annotations.storageclass\\.kubernetes\\.io/is-default-class}"); got != "true" {
		t.Errorf("gp2 default-class annotation %q", got)
	}
	run("apply", "-f", filepath.Join("..", "..", "examples", "seed"))
	run("wait", "--for=condition=Ready", "pod/my-app-pod", "--timeout=120s")
	run("wait", "--for=jsonpath={.status.phase}=Bound", "pvc/my-app-pvc", "--timeout=60s")
	run("rollout", "status", "deployment/web", "--timeout=120s")
	// kubelab trace and why on the running pod, found through the data dir.
	var traced bytes.Buffer
	if err := Run(context.Background(), []string{"trace", "pod/my-app-pod", "--data-dir", dir, "--kubeconfig", kc}, &traced, io.Discard); err != nil {
		t.Fatalf("kubelab trace: %v", err)
	}
	for _, want := range []string{"POST PersistentVolumeClaim my-app-pvc", "CreateVolume", "ControllerPublishVolume", "AttachVolume", "State transitions"} {
		if !strings.Contains(traced.String(), want) {
			t.Errorf("kubelab trace pod/my-app-pod lacks %q:\n%s", want, traced.String())
		}
	}
	var why bytes.Buffer
	if err := Run(context.Background(), []string{"why", "pvc/my-app-pvc", "--data-dir", dir, "--kubeconfig", kc}, &why, io.Discard); err != nil {
		t.Fatalf("kubelab why: %v", err)
	}
	if !strings.Contains(why.String(), "not stuck") {
		t.Errorf("kubelab why pvc/my-app-pvc = %q, want not stuck", why.String())
	}
	if err := Run(context.Background(), []string{"trace", "pod/my-app-pod", "--data-dir", dir, "-o", "png"}, io.Discard, io.Discard); err == nil ||
		!strings.Contains(err.Error(), `output "png": must be text, svg or html`) {
		t.Errorf("kubelab trace -o png: %v, want an error naming the output", err)
	}
	stop()

	// The same data dir again: same nodes, renewed by the new kubelets, the pod and its
	// claim are still there.
	args[len(args)-3], args[len(args)-1] = fmt.Sprint(apiservertest.FreePort(t)), fmt.Sprint(apiservertest.FreePort(t))
	restarted := time.Now().Add(-time.Second)
	runUp(t, args...)
	renewed := run("get", "leases", "-n", "kube-node-lease", "-o", "jsonpath={range .items[*]}{.spec.renewTime}{\"\\n\"}{end}")
	for _, line := range strings.Fields(renewed) {
		at, err := time.Parse(time.RFC3339Nano, line)
		if err != nil || at.Before(restarted) {
			t.Errorf("a node lease renewed at %q (%v), before the restart at %s", line, err, restarted.Format(time.RFC3339Nano))
		}
	}
	if n := len(strings.Fields(renewed)); n != 4 {
		t.Errorf("%d node leases after the restart, want 4", n)
	}
	again := run("get", "nodes", "-o", "jsonpath={range .items[*]}{.metadata.name} {.metadata.labels.topology\\.kubernetes\\.io/zone} {.spec.providerID}{\"\\n\"}{end}")
	if strings.TrimSpace(again) != strings.TrimSpace(nodes) {
		t.Errorf("nodes after restart:\n%s\nbefore:\n%s", again, nodes)
	}
	run("wait", "--for=condition=Ready", "pod/my-app-pod", "--timeout=120s")
	if got := run("get", "pvc", "my-app-pvc", "-o", "jsonpath={.status.phase}"); got != "Bound" {
		t.Errorf("claim after restart: %q", got)
	}
}
