package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/moby/sys/mountinfo"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/cluster"
	"github.com/kubelab/kubelab/internal/cluster/clustertest"
	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/util/rundir"
	"github.com/kubelab/kubelab/internal/vpc"
)

// upProcess is a `kubelab up` run as its own process.
type upProcess struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

// startUpProcess runs bin up --offline with args (tests never leave the machine) and
// waits until it says it is up.
func startUpProcess(t *testing.T, bin string, args ...string) *upProcess {
	t.Helper()
	return startUpCommand(t, exec.Command(bin, append([]string{"up", "--offline"}, args...)...))
}

// startUpCommand runs cmd, a `kubelab up`, and waits until it says it is up.
func startUpCommand(t *testing.T, cmd *exec.Cmd) *upProcess {
	t.Helper()
	p := &upProcess{cmd: cmd, out: &syncBuffer{}, done: make(chan error, 1)}
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
	for !strings.Contains(p.out.String(), upLine) {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("kubelab up exited (%v) before it was up:\n%s", err, p.out.String())
		case <-deadline:
			t.Fatalf("kubelab up not up after 3 minutes:\n%s", p.out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if !upMessage.MatchString(p.out.String()) {
		t.Errorf("kubelab up did not say how long it took:\n%s", p.out.String())
	}
	return p
}

// TestUpRealKill9 runs a user's first commands (a token, a pod) as the very next ones
// after `kubelab up` with a real node says it is up, applies the storage manifests of
// examples/seed verbatim with the test's kubectl (claims of classes standard and gp2
// Bound, their pods Running), kills `kubelab up` with -9 while those pods run with their
// volumes mounted, starts a newer kubelab binary on the same data dir and checks that the
// pods are Running again with nothing mounted twice and the EBS CSI add-on's pods rolled
// to the newer binary's image; a second `up` on the data dir in use is refused naming
// the holder; `kubelab down` then stops it and nothing is left on the machine: no mount,
// loop device, process, network namespace or socket of the data dir. The data dir is 200
// characters long: the nodes' sockets are not under it.
//
// It runs once per pod network, the two in parallel: overlay, and vpc, where after the
// restart the cloud still has every running pod's address assigned on an ENI of its node's
// instance and the node's aws-node checkpoint still holds them.
func TestUpRealKill9(t *testing.T) {
	testutil.RequireRoot(t, clustertest.RealNodeTools...)
	bin := filepath.Join(testutil.Commands(t), "kubelab")
	for _, podNetwork := range []string{"overlay", "vpc"} {
		t.Run(podNetwork, func(t *testing.T) {
			t.Parallel()
			upRealKill9(t, bin, podNetwork)
		})
	}
}

func upRealKill9(t *testing.T, bin, podNetwork string) {
	base, err := os.MkdirTemp("", "kl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	dir := filepath.Join(base, strings.Repeat("d", 200-len(base)-1))
	t.Cleanup(func() { releaseDataDir(t, dir) }) // after a failure midway: nothing stays
	t.Cleanup(func() { clustertest.AssertNothingLeft(t, dir) })
	args := func() []string {
		return []string{"--offline", "--data-dir", dir, "--nodes", "1", "--zones", "us-east-1a", "--secure-port", "0", "--pod-network", podNetwork,
			"--etcd-client-port", fmt.Sprint(apiservertest.FreePort(t)), "--etcd-peer-port", fmt.Sprint(apiservertest.FreePort(t))}
	}
	kc := filepath.Join(dir, "kubeconfig")
	run := func(args ...string) string {
		t.Helper()
		return clustertest.Kubectl(t, kc, args...)
	}
	first := startUpProcess(t, bin, args()...)
	if !strings.Contains(first.out.String(), offlineNotice) {
		t.Errorf("kubelab up --offline did not say so at start:\n%s", first.out.String())
	}
	assertFirstCommands(t, kc)
	// The storage manifests of examples/seed, verbatim: the gp2 class, claims of classes
	// standard (1Gi) and gp2 (10Gi), and the pods that mount them.
	seed := clustertest.Seed()
	var files []string
	for _, f := range []string{"00-storageclass-gp2.yaml", "10-pvc.yaml", "11-pvc-gp2.yaml", "20-pod.yaml", "21-pod-gp2.yaml"} {
		files = append(files, "-f", filepath.Join(seed, f))
	}
	run(append([]string{"apply"}, files...)...)
	run("wait", "--for=condition=Ready", "pod/my-app-pod", "pod/myapp", "--timeout=180s")
	run("wait", "--for=jsonpath={.status.phase}=Bound", "pvc/my-app-pvc", "pvc/myapp-pvc", "--timeout=60s")
	ipBefore := run("get", "pod", "my-app-pod", "-o", "jsonpath={.status.podIP}")
	assertAddonDebugCommands(t, bin, dir, run("get", "pod", "my-app-pod", "-o", "jsonpath={.spec.nodeName}"))
	// The pod's volumes' mounts: the volume's global mount and the pod's own (the add-on's
	// pods, and their mounts, are replaced by the rollout below).
	uid := run("get", "pod", "my-app-pod", "-o", "jsonpath={.metadata.uid}")
	before := mountCounts(t, dir)
	for mp := range before {
		if !strings.Contains(mp, uid) && !strings.Contains(mp, "/plugins/kubernetes.io/csi/") {
			delete(before, mp)
		}
	}
	if len(before) < 2 {
		t.Fatalf("mounts under %s with the pod running: %v, want its global mount and its pod mount", dir, before)
	}

	// A second up on the data dir in use is refused, naming the holder.
	out, err := exec.Command(bin, append([]string{"up", "--offline"}, args()...)...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), fmt.Sprintf("in use by kubelab up (pid %d)", first.cmd.Process.Pid)) {
		t.Errorf("second up on a data dir in use: %v\n%s", err, out)
	}

	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.done
	first.done <- nil

	// The second run is of a newer kubelab binary: the add-on's pods roll to its image.
	const rolled = "the EBS CSI add-on's pods (kube-system) rolled to this kubelab's image"
	if strings.Contains(first.out.String(), rolled) {
		t.Errorf("the first up on a new data dir says %q", rolled)
	}
	newer := newerBinary(t, bin)
	second := startUpProcess(t, newer, args()...)
	if !strings.Contains(second.out.String(), rolled) {
		t.Errorf("up with a newer binary does not say %q:\n%s", rolled, second.out.String())
	}
	assertAddonOfBinary(t, kc, newer)
	run("wait", "--for=condition=Ready", "pod/my-app-pod", "pod/myapp", "--timeout=120s")
	// The pod kept its sandbox, and with it its address.
	if ip := run("get", "pod", "my-app-pod", "-o", "jsonpath={.status.podIP}"); ip != ipBefore || ip == "" {
		t.Errorf("pod IP %q after the restart, %q before", ip, ipBefore)
	}
	if podNetwork == "vpc" {
		assertPodIPsAssigned(t, dir, kc)
	}
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
	out, err = exec.Command(bin, "node", "shell", node, "--data-dir", dir, "--", "sh", "-c",
		"pwd; ls plugins_registry; ctr containers ls -q | wc -l; "+
			// IMDSv2, which works whether the instance requires it or not.
			"token=$(curl -s -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' http://169.254.169.254/latest/api/token); "+
			`curl -s -H "X-aws-ec2-metadata-token: $token" http://169.254.169.254/latest/meta-data/placement/availability-zone`).CombinedOutput()
	lines := strings.Fields(string(out))
	if err != nil || len(lines) != 4 || lines[0] != filepath.Join(dir, "nodes", node, "kubelet") || lines[1] != "ebs.csi.aws.com-reg.sock" || lines[2] == "0" ||
		lines[3] != "us-east-1a" {
		t.Errorf("kubelab node shell %s: %v\n%s", node, err, out)
	}

	if podNetwork == "vpc" { // still, after the node's checks above: none given back since
		assertPodIPsAssigned(t, dir, kc)
	}

	out, err = exec.Command(newer, "down", "--data-dir", dir).CombinedOutput()
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

// newerBinary is a copy of the kubelab binary bin beside it, one byte longer: another
// build, as an upgrade brings.
func newerBinary(t *testing.T, bin string) string {
	t.Helper()
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(filepath.Dir(bin), "kubelab-newer-*")
	if err != nil {
		t.Fatal(err)
	}
	newer := f.Name()
	_, err = f.Write(append(b, 0))
	if err := errors.Join(err, f.Chmod(0o755), f.Close()); err != nil {
		os.Remove(newer)
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(newer) })
	return newer
}

// assertAddonOfBinary checks that the EBS CSI add-on's workloads, and (once the pods of
// the rollout have ended) every one of their pods, are of the image built from the
// kubelab binary bin: their pod template names its size.
func assertAddonOfBinary(t *testing.T, kubeconfig, bin string) {
	t.Helper()
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%d bytes,", fi.Size())
	// ofOther lists the objects kubectl prints (name, then the annotation) not of bin.
	ofOther := func(args ...string) (names []string, n int) {
		out := clustertest.Kubectl(t, kubeconfig, append([]string{"-n", "kube-system", "get"}, args...)...)
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if name, ann, _ := strings.Cut(l, "\t"); !strings.HasPrefix(ann, want) {
				names = append(names, name+" ("+ann+")")
			}
			n++
		}
		return names, n
	}
	const annotation = `.kubelab\.dev/kubelab-binary}{"\n"}{end}`
	if other, n := ofOther("deployment/ebs-csi-controller", "daemonset/ebs-csi-node", "-o",
		`jsonpath={range .items[*]}{.metadata.name}{"\t"}{.spec.template.metadata.annotations`+annotation); n != 2 || len(other) > 0 {
		t.Errorf("the add-on's workloads not of %s (%s): %v", bin, want, other)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "every add-on pod of "+bin, func() (bool, error) {
		other, n := ofOther("pods", "-l", "app.kubernetes.io/name=aws-ebs-csi-driver", "-o",
			`jsonpath={range .items[*]}{.metadata.name}{"\t"}{.metadata.annotations`+annotation)
		if len(other) > 0 {
			t.Logf("add-on pods of another binary: %v\n%s", other, clustertest.Kubectl(t, kubeconfig, "get", "pods", "-n", "kube-system", "-o", "wide"))
		}
		return n >= 3 && len(other) == 0, nil
	})
}

// assertPodIPsAssigned checks, in the vpc pod network, that the cloud has the address of
// every running pod that is not on the host network assigned as a secondary private IP of
// an ENI attached to its node's instance, and that the node's aws-node checkpoint
// (<node dir>/aws-node/ipam.json) holds it.
func assertPodIPsAssigned(t *testing.T, dir, kc string) {
	t.Helper()
	ctx := context.Background()
	src, err := (&traceOptions{dataDir: dir, kubeconfig: kc}).sources(ctx)
	if err != nil || src.EC2 == nil {
		t.Fatalf("the cloud's EC2 client: %v", err)
	}
	out, err := src.EC2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{})
	if err != nil {
		t.Fatal(err)
	}
	owner := map[string]string{} // secondary address → instance
	for _, n := range out.NetworkInterfaces {
		if n.Attachment == nil {
			continue
		}
		for _, a := range n.PrivateIpAddresses {
			if !aws.ToBool(a.Primary) {
				owner[aws.ToString(a.PrivateIpAddress)] = aws.ToString(n.Attachment.InstanceId)
			}
		}
	}
	nodes, err := src.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	instance := map[string]string{}
	for _, n := range nodes.Items {
		instance[n.Name] = n.Spec.ProviderID[strings.LastIndex(n.Spec.ProviderID, "/")+1:]
	}
	pods, err := src.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkpoints := map[string]string{}
	seen := 0
	for _, p := range pods.Items {
		if p.Spec.HostNetwork || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
			continue
		}
		seen++
		if got, want := owner[p.Status.PodIP], instance[p.Spec.NodeName]; got != want || want == "" {
			t.Errorf("after the restart pod %s/%s's address %s is on an ENI of %q, want its node's instance %q",
				p.Namespace, p.Name, p.Status.PodIP, got, want)
		}
		ckpt, ok := checkpoints[p.Spec.NodeName]
		if !ok {
			b, err := os.ReadFile(filepath.Join(dir, "nodes", p.Spec.NodeName, "aws-node", "ipam.json"))
			if err != nil {
				t.Error(err)
			}
			ckpt = string(b)
			checkpoints[p.Spec.NodeName] = ckpt
		}
		if !strings.Contains(ckpt, `"`+p.Status.PodIP+`"`) {
			t.Errorf("after the restart node %s's aws-node checkpoint lacks pod %s/%s's address %s:\n%s",
				p.Spec.NodeName, p.Namespace, p.Name, p.Status.PodIP, ckpt)
		}
	}
	if seen < 3 { // first, my-app-pod, myapp
		t.Errorf("after the restart %d running pods with an address, want at least 3", seen)
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

// releaseDataDir ends and removes what a kubelab up on dir left on the machine when the
// test failed before `kubelab down` (after its kill -9, say), so that removing dir never
// reaches into a mounted volume: the processes of its pods (in its pods' cgroups) and its
// containerds and shims (their command lines name dir or its run directory), then its
// mounts, deepest first, then its loop devices, its network namespaces, its run directory
// and its pods' cgroups. Everything it ends or removes was made by this test's cluster.
func releaseDataDir(t *testing.T, dir string) {
	t.Helper()
	var pids []int
	for _, root := range []string{"/sys/fs/cgroup/pids", "/sys/fs/cgroup"} {
		_ = filepath.WalkDir(filepath.Join(root, cluster.CgroupRoot(dir)), func(p string, e os.DirEntry, err error) error {
			if err == nil && e.Name() == "cgroup.procs" {
				b, _ := os.ReadFile(p)
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil {
						pids = append(pids, pid)
					}
				}
			}
			return nil
		})
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		if b, err := os.ReadFile(f); err == nil && (bytes.Contains(b, []byte(dir)) || bytes.Contains(b, []byte(rundir.For(dir)+"/"))) {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil && pid != os.Getpid() {
				pids = append(pids, pid)
			}
		}
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	ms, _ := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	sort.Slice(ms, func(i, j int) bool { return len(ms[i].Mountpoint) > len(ms[j].Mountpoint) })
	for _, m := range ms {
		_ = syscall.Unmount(m.Mountpoint, syscall.MNT_DETACH)
	}
	loops, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range loops {
		if b, err := os.ReadFile(f); err == nil && strings.HasPrefix(string(b), dir) {
			dev := "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(f)))
			if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
				t.Logf("detach %s: %v %s", dev, err, out)
			}
		}
	}
	if err := vpc.RemoveAll(dir); err != nil {
		t.Log(err)
	}
	if err := rundir.Remove(rundir.For(dir)); err != nil && !os.IsNotExist(err) {
		t.Log(err)
	}
	cgroups, _ := filepath.Glob("/sys/fs/cgroup/*" + cluster.CgroupRoot(dir))
	for _, root := range cgroups {
		var tree []string
		_ = filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				tree = append(tree, p)
			}
			return nil
		})
		for i := len(tree) - 1; i >= 0; i-- {
			_ = syscall.Rmdir(tree[i])
		}
		_ = syscall.Rmdir(filepath.Dir(root))
	}
}

// assertAddonDebugCommands runs the EBS CSI add-on's debugging commands for the example's
// pod (examples/seed), verbatim: kubectl's (the attacher's and the controller plugin's
// logs, the node plugin's on the pod's node; the test's kubectl, testutil.KubectlDir) from
// this machine, and the aws CLI's from a shell on the
// node, as on an EC2 instance; each shows the pod's volume, attached to the node.
func assertAddonDebugCommands(t *testing.T, bin, dir, node string) {
	t.Helper()
	sh := func(line string, env ...string) string {
		t.Helper()
		cmd := exec.Command("sh", "-c", line)
		cmd.Env = append(append(os.Environ(), "KUBECONFIG="+filepath.Join(dir, "kubeconfig"), "KUBECTL_KUBERC=false",
			"PATH="+testutil.KubectlDir(t)+":"+os.Getenv("PATH")), env...)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, b)
		}
		return string(b)
	}
	pv := strings.TrimSpace(sh(`kubectl get pvc my-app-pvc -o jsonpath='{.spec.volumeName}'`))
	handle := strings.TrimSpace(sh(`kubectl get pv ` + pv + ` -o jsonpath='{.spec.csi.volumeHandle}'`))
	instance := strings.TrimSpace(sh(`kubectl get node ` + node + ` -o jsonpath='{.spec.providerID}'`))
	instance = instance[strings.LastIndex(instance, "/")+1:]
	for _, c := range []struct{ line, want string }{
		{`kubectl logs -n kube-system -l app=ebs-csi-controller -c csi-attacher --tail=50`, `] "attached"`},
		{`kubectl logs -n kube-system -l app=ebs-csi-controller -c ebs-plugin --tail=100`, "ControllerPublishVolume: done"},
		{`kubectl logs -n kube-system $(kubectl get pod -n kube-system -l app=ebs-csi-node \
    --field-selector spec.nodeName=$NODE -o jsonpath='{.items[0].metadata.name}') -c ebs-plugin`, "NodeStageVolume: done"},
	} {
		out := sh(c.line, "NODE="+node)
		if !strings.Contains(out, c.want) || !strings.Contains(out, handle) {
			t.Errorf("%s\nprints no %q line for %s:\n%s", c.line, c.want, handle, out)
		}
		if !strings.Contains(c.line, "-c csi-attacher") {
			continue
		}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if !klogTextLine.MatchString(l) {
				t.Errorf("%s\nprints a line not in klog's text format: %q", c.line, l)
			}
			if k := repeatedKey(l); k != "" {
				t.Errorf("%s\nprints a line with key %s twice: %q", c.line, k, l)
			}
		}
	}
	out, err := exec.Command(bin, "node", "shell", node, "--data-dir", dir, "--", "sh", "-c", "PV_HANDLE="+handle+`
aws ec2 describe-volumes --volume-ids $PV_HANDLE \
  --query 'Volumes[0].{State:State,Attachments:Attachments}'`).CombinedOutput()
	if err != nil {
		t.Fatalf("aws ec2 describe-volumes on node %s: %v\n%s", node, err, out)
	}
	var got struct {
		State       string
		Attachments []struct{ InstanceId, VolumeId, State string }
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("aws ec2 describe-volumes on node %s: %v\n%s", node, err, out)
	}
	if got.State != "in-use" || len(got.Attachments) != 1 || got.Attachments[0].InstanceId != instance ||
		got.Attachments[0].VolumeId != handle || got.Attachments[0].State != "attached" {
		t.Errorf("aws ec2 describe-volumes on node %s: %+v, want %s in-use, attached to %s", node, got, handle, instance)
	}
}

// klogTextLine is a line in klog's text format: severity, date, time, process id,
// file:line and the quoted message.
var klogTextLine = regexp.MustCompile(`^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} +\d+ \S+:\d+\] "`)

// quoted is a quoted value of a log line, with its escapes; logKey a key of it.
var (
	quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	logKey = regexp.MustCompile(` ([A-Za-z][A-Za-z0-9_.-]*)=`)
)

// repeatedKey is the first key a log line writes twice, or "".
func repeatedKey(line string) string {
	seen := map[string]bool{}
	for _, m := range logKey.FindAllStringSubmatch(quoted.ReplaceAllString(line, `""`), -1) {
		if seen[m[1]] {
			return m[1]
		}
		seen[m[1]] = true
	}
	return ""
}
