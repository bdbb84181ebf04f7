package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/cluster/clustertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// runUp runs `kubelab up --offline` with args (tests never leave the machine), the
// command under test, in this process until the test ends; it returns once the cluster printed that it is up, with its output so far.
// (Tests that need a cluster but do not test `kubelab up` start one with clustertest.)
func runUp(t *testing.T, args ...string) *syncBuffer {
	t.Helper()
	out, errOut := &syncBuffer{}, &syncBuffer{}
	testutil.Start(t, "kubelab up", upTimeout, func(ctx context.Context) error {
		if err := Run(ctx, append([]string{"up", "--offline"}, args...), out, errOut); err != nil {
			return fmt.Errorf("%w\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
		}
		return nil
	}, func() bool { return strings.Contains(out.String(), upLine) })
	if !upMessage.MatchString(out.String()) {
		t.Errorf("kubelab up did not say how long it took:\n%s", out.String())
	}
	return out
}

// upLine starts the line `kubelab up` prints once the cluster is usable; upMessage is that
// line whole, with the time it took.
const upLine = "kubelab is up (in "

var upMessage = regexp.MustCompile(`(?m)^kubelab is up \(in [0-9.hms]+\)\.$`)

// assertFirstCommands runs a user's first commands on the cluster of kc, as the very next
// ones after `kubelab up` said it is up; both fail while namespace default has no
// ServiceAccount default: a token of that account, and `kubectl run` of a busybox pod,
// which then runs.
func assertFirstCommands(t *testing.T, kc string) {
	t.Helper()
	run := func(args ...string) string {
		t.Helper()
		return clustertest.Kubectl(t, kc, args...)
	}
	if token := strings.TrimSpace(run("create", "token", "default")); strings.Count(token, ".") != 2 {
		t.Errorf("kubectl create token default = %q, want a JWT", token)
	}
	if out := run("run", "first", "--image=busybox", "--restart=Never", "--", "sleep", "3600"); !strings.Contains(out, "pod/first created") {
		t.Errorf("kubectl run first: %q", out)
	}
	run("wait", "--for=condition=Ready", "pod/first", "--timeout=120s")
}

// assertProgress checks that `kubelab up`'s output told its progress before it said it
// is up: the control plane, then each of nodes (kubectl's lines, the name first) Ready,
// one line each.
func assertProgress(t *testing.T, out, nodes string) {
	t.Helper()
	up := strings.Index(out, upLine)
	cp := strings.Index(out, "up: control plane ready")
	if up < 0 || cp < 0 || cp > up {
		t.Errorf("kubelab up did not tell the control plane ready before it was up:\n%s", out)
	}
	for _, l := range strings.Split(strings.TrimSpace(nodes), "\n") {
		name := strings.Fields(l)[0]
		line := "up: node " + name + " Ready"
		if i := strings.Index(out, line); i < 0 || i > up || strings.Count(out, line) != 1 {
			t.Errorf("kubelab up did not tell once, before it was up, %q:\n%s", line, out)
		}
	}
}

// upTimeout is how long `kubelab up` may take to say it is up.
const upTimeout = 3 * time.Minute

// TestUpHollow runs `kubelab up --hollow --nodes 4` and drives it with kubectl (the real
// one when installed, else kubelab's): four nodes over three zones, the storage classes
// gp2 (the default), gp3 and standard, the manifests of examples/seed applied, their pods
// Running with their claims Bound; a token of the default ServiceAccount and a pod made by
// `kubectl run` as the very next commands after it says it is up. A second `up` on the
// same data dir finds the same
// nodes (their instances are not launched again) and the pod still there.
func TestUpHollow(t *testing.T) {
	dir := t.TempDir()
	args := func() []string {
		return []string{"--hollow", "--nodes", "4", "--data-dir", dir, "--secure-port", "0",
			"--etcd-client-port", fmt.Sprint(apiservertest.FreePort(t)), "--etcd-peer-port", fmt.Sprint(apiservertest.FreePort(t))}
	}
	kc := filepath.Join(dir, "kubeconfig")
	var nodes string
	t.Run("up", func(t *testing.T) {
		out := runUp(t, args()...)
		assertFirstCommands(t, kc)
		if !strings.Contains(out.String(), kc) {
			t.Errorf("kubelab up did not print its kubeconfig %s:\n%s", kc, out.String())
		}
		nodes = assertUpHollow(t, dir)
		assertProgress(t, out.String(), nodes)
	})
	if t.Failed() {
		return
	}
	t.Run("up again on the same data dir", func(t *testing.T) {
		restarted := time.Now().Add(-time.Second)
		runUp(t, args()...)
		assertUpAgain(t, kc, nodes, restarted)
	})
}

// assertUpHollow drives the hollow cluster `kubelab up` runs on dir with kubectl, kubelab
// trace and kubelab why, and returns its nodes as kubectl lists them.
func assertUpHollow(t *testing.T, dir string) string {
	kc := filepath.Join(dir, "kubeconfig")
	run := func(args ...string) string {
		t.Helper()
		return clustertest.Kubectl(t, kc, args...)
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
	// The classes: gp2 the one default, gp3 and standard beside it, all of the EBS CSI
	// driver and WaitForFirstConsumer.
	classes := run("get", "storageclass", "-o", "jsonpath={range .items[*]}{.metadata.name} {.provisioner} {.volumeBindingMode} {.metadata.annotations.storageclass\\.kubernetes\\.io/is-default-class}{\"\\n\"}{end}")
	if want := "gp2 ebs.csi.aws.com WaitForFirstConsumer true\ngp3 ebs.csi.aws.com WaitForFirstConsumer \nstandard ebs.csi.aws.com WaitForFirstConsumer \n"; classes != want {
		t.Errorf("storage classes:\n%s\nwant:\n%s", classes, want)
	}
	run("apply", "-f", clustertest.Seed())
	run("wait", "--for=condition=Ready", "pod/my-app-pod", "pod/myapp", "--timeout=120s")
	run("wait", "--for=jsonpath={.status.phase}=Bound", "pvc/my-app-pvc", "pvc/myapp-pvc", "--timeout=60s")
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
	return nodes
}

// assertUpAgain checks the cluster of kc after `kubelab up` ran again on its data dir at
// restarted: the same nodes, renewed by the new kubelets, the pod and its claim still
// there.
func assertUpAgain(t *testing.T, kc, nodes string, restarted time.Time) {
	run := func(args ...string) string {
		t.Helper()
		return clustertest.Kubectl(t, kc, args...)
	}
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
	// The pod identity webhook of this run is the one the MutatingWebhookConfiguration
	// calls: a pod of an annotated service account gets its role.
	run("create", "serviceaccount", "irsa-again")
	run("annotate", "serviceaccount", "irsa-again", "eks.amazonaws.com/role-arn=arn:aws:iam::111122223333:role/again")
	testutil.EventuallyWithin(t, time.Minute, "a pod of an annotated service account to get its role after the restart", func() bool {
		env := run("run", "irsa-again", "--image=busybox", "--restart=Never", "--dry-run=server",
			`--overrides={"spec":{"serviceAccountName":"irsa-again"}}`, "-o", "jsonpath={.spec.containers[0].env[*].name}")
		return strings.Contains(env, "AWS_ROLE_ARN") && strings.Contains(env, "AWS_WEB_IDENTITY_TOKEN_FILE")
	})
	if n := strings.TrimSpace(run("get", "mutatingwebhookconfigurations", "-o", "name")); n != "mutatingwebhookconfiguration.admissionregistration.k8s.io/pod-identity-webhook" {
		t.Errorf("mutating webhook configurations after the restart: %q, want pod-identity-webhook once", n)
	}
}

func TestHostsFileFor(t *testing.T) {
	for _, tc := range []struct {
		hollow bool
		euid   int
		want   string
	}{{false, 0, "/etc/hosts"}, {true, 0, ""}, {false, 1000, ""}, {true, 1000, ""}} {
		if got := hostsFileFor(tc.hollow, tc.euid); got != tc.want {
			t.Errorf("hostsFileFor(%v, %d) = %q, want %q", tc.hollow, tc.euid, got, tc.want)
		}
	}
}
