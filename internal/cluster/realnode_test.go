package cluster_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/cluster"
	"github.com/kubelab/kubelab/internal/cluster/clustertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// containerPID is the main process of the pod's container name, found through the
// container's cgroup.
func (tc *testCluster) containerPID(pod *corev1.Pod, name string) int {
	tc.T.Helper()
	var id string
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == name {
			_, id, _ = strings.Cut(cs.ContainerID, "://")
		}
	}
	if id == "" {
		tc.T.Fatalf("pod %s has no container %s in its status", pod.Name, name)
	}
	procs, _ := filepath.Glob("/sys/fs/cgroup/*" + cluster.CgroupRoot(tc.DataDir()) + "/" + pod.Spec.NodeName + "/pod" + string(pod.UID) + "/" + id + "/cgroup.procs")
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(line); err == nil {
				return pid
			}
		}
	}
	tc.T.Fatalf("no process of container %s (%s) of pod %s", name, id, pod.Name)
	return 0
}

// mountAt is the mount at path as the process pid sees it.
func mountAt(t *testing.T, pid int, path string) *mountinfo.Info {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ms, err := mountinfo.GetMountsFromReader(f, mountinfo.SingleEntryFilter(path))
	if err != nil || len(ms) == 0 {
		t.Fatalf("nothing mounted at %s for process %d: %v", path, pid, err)
	}
	return ms[len(ms)-1]
}

// hostMount is the mount at path in kubelab's mount namespace.
func hostMount(t *testing.T, path string) *mountinfo.Info {
	t.Helper()
	ms, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(path))
	if err != nil || len(ms) == 0 {
		t.Fatalf("nothing mounted at %s: %v", path, err)
	}
	return ms[len(ms)-1]
}

// TestRealSeedFlow runs the claim and nginx pod of examples/seed on real nodes, the EBS
// CSI add-on running as the pods of kube-system/ebs-csi-controller and ebs-csi-node, with
// an ext4 filesystem on the cloud's loop device, staged at the global mount and
// bind-mounted into the pod dir and the container's mountPath; nginx serves a file written
// there; the pod runs again on another node of the zone and finds the file; deleting the
// claim removes the mounts, the loop device and the cloud volume. The controller's pods
// deleted while two claims are provisioning leave one volume per claim.
func TestRealSeedFlow(t *testing.T) {
	t.Parallel()
	tc := startRealCluster(t, 2, "us-east-1a")
	ctx := context.Background()
	ns := tc.Namespace("real-seed")
	nodes := tc.Nodes()
	_, pod := tc.seedPair(ns, "my-app-pvc", "my-app-pod", "gp2")
	pod = tc.WaitPodRunning(ns, pod.Name)
	if pod.Status.PodIP == "" {
		t.Fatalf("pod has no IP: %+v", pod.Status)
	}

	pvc, err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "my-app-pvc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv := pvc.Spec.VolumeName
	var node cluster.Node
	for _, n := range nodes {
		if n.Name == pod.Spec.NodeName {
			node = n
		}
	}
	root := tc.KubeletRoot(node)
	staging := hostMount(t, filepath.Join(root, "plugins/kubernetes.io/csi/pv", pv, "globalmount"))
	target := hostMount(t, filepath.Join(root, "pods", string(pod.UID), "volumes/kubernetes.io~csi", pv, "mount"))
	if staging.FSType != "ext4" || !strings.HasPrefix(staging.Source, "/dev/loop") || target.Source != staging.Source {
		t.Fatalf("staging %s on %s, target %s on %s: want ext4 on the same loop device", staging.FSType, staging.Source, target.FSType, target.Source)
	}
	tc.assertAddonCommands(pod, pv)
	tc.assertCSIDriverOnIRSA(ns)
	pid := tc.containerPID(pod, "my-container")
	inCtr := mountAt(t, pid, "/usr/share/nginx/html")
	if inCtr.FSType != "ext4" || inCtr.Source != staging.Source {
		t.Fatalf("container sees %s on %s at its mountPath, want ext4 on %s", inCtr.FSType, inCtr.Source, staging.Source)
	}
	// Write through the container's root, as `kubectl exec … sh -c 'echo hi > …'` would,
	// and read it back from nginx inside the pod's network namespace.
	index := filepath.Join("/proc", strconv.Itoa(pid), "root/usr/share/nginx/html/index.html")
	if err := os.WriteFile(index, []byte("hi from kubelab\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "nginx serves the volume's index.html", func() (bool, error) {
		out, err := exec.Command("nsenter", "-t", strconv.Itoa(pid), "-n", "busybox", "wget", "-qO-", "http://"+pod.Status.PodIP+"/").CombinedOutput()
		return err == nil && string(out) == "hi from kubelab\n", nil
	})

	// Again on the other node of the zone: the data is there.
	other := nodes[0].Name
	if other == pod.Spec.NodeName {
		other = nodes[1].Name
	}
	tc.deletePodAndWait(ns, pod.Name)
	if ms := volumeMounts(t, tc.DataDir(), pv, staging.Source); len(ms) != 0 {
		t.Fatalf("mounts left on %s after the pod went: %s", node.Name, ms[0].Mountpoint)
	}
	again := clustertest.SeedObject[*corev1.Pod](t, "20-pod.yaml")
	again.Namespace, again.Spec.NodeName = ns, other
	if _, err := tc.Client.CoreV1().Pods(ns).Create(ctx, again, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod = tc.WaitPodRunning(ns, again.Name)
	pid = tc.containerPID(pod, "my-container")
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "root/usr/share/nginx/html/index.html"))
	if err != nil || string(b) != "hi from kubelab\n" {
		t.Fatalf("on %s the volume holds %q (%v), want the file written on %s", other, b, err, node.Name)
	}

	// Claim deleted: mounts, loop device and cloud volume go.
	tc.deletePodAndWait(ns, pod.Name)
	if err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "my-app-pvc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "cloud volume of "+pv+" deleted", func() (bool, error) {
		return len(tc.CloudVolumes(pv)) == 0, nil
	})
	if ms := volumeMounts(t, tc.DataDir(), pv, staging.Source); len(ms) != 0 {
		t.Fatalf("mounts left after the claim went: %s", ms[0].Mountpoint)
	}

	tc.killControllerMidFlow(ns)
	tc.assertAddonPodsHealthy()
	tc.assertRealTrace()
}

// volumeMounts are the mounts under dataDir of volume pv (its staging and publish
// paths on every node) or of its loop device dev (if not "").
func volumeMounts(t *testing.T, dataDir, pv, dev string) []*mountinfo.Info {
	t.Helper()
	ms, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		mine := strings.HasPrefix(m.Mountpoint, dataDir+"/") &&
			((dev != "" && m.Source == dev) || strings.Contains(m.Mountpoint, "/"+pv+"/"))
		return !mine, false
	})
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// nodeReady is the node's Ready condition.
func (tc *testCluster) nodeReady(name string) corev1.NodeCondition {
	tc.T.Helper()
	n, err := tc.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		tc.T.Fatal(err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c
		}
	}
	return corev1.NodeCondition{}
}

// TestRealRuntimeDown stops a node's containerd: the node reports NotReady with the
// runtime's error as the reason, and when containerd is started again the node is Ready
// and its pod runs again.
func TestRealRuntimeDown(t *testing.T) {
	t.Parallel()
	tc := startRealCluster(t, 1, "us-east-1a")
	ctx := context.Background()
	ns := tc.Namespace("runtime-down")
	node := tc.Nodes()[0].Name
	if _, err := tc.Client.CoreV1().Pods(ns).Create(ctx, busyboxPod(ns, "sleeper", corev1.RestartPolicyAlways, "sleep 3600"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tc.WaitPodRunning(ns, "sleeper")

	if err := tc.Stop(ctx, "containerd/"+node); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "node NotReady while its runtime is down", func() (bool, error) {
		c := tc.nodeReady(node)
		return c.Status == corev1.ConditionFalse, nil
	})
	if c := tc.nodeReady(node); c.Reason != "KubeletNotReady" || !strings.HasPrefix(c.Message, "container runtime is down: ") {
		t.Errorf("Ready condition %s/%s %q, want KubeletNotReady naming the runtime", c.Status, c.Reason, c.Message)
	}

	if err := tc.Start(ctx, "containerd/"+node); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "node Ready again", func() (bool, error) {
		return tc.nodeReady(node).Status == corev1.ConditionTrue, nil
	})
	testutil.EventuallyWithin(t, clustertest.Timeout, "pod sleeper running again in a new sandbox", func() (bool, error) {
		p, err := tc.Client.CoreV1().Pods(ns).Get(ctx, "sleeper", metav1.GetOptions{})
		if err != nil || !clustertest.PodRunning(p) {
			return false, err
		}
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Running != nil, nil
	})
}

// TestRealNodeWorkloads runs, on one real node, kubectl's streams, probes and hooks, a
// claim grown in use and pods that fail, finish or wait, one after the other: each in
// its own namespace, sharing the cluster so that it starts once.
func TestRealNodeWorkloads(t *testing.T) {
	t.Parallel()
	tc := startRealCluster(t, 1, "us-east-1a")
	t.Run("kubectl streams", func(t *testing.T) { testKubectlStreams(t, tc) })
	t.Run("probes", func(t *testing.T) { testProbes(t, tc) })
	t.Run("resize in use", func(t *testing.T) { testResizeInUse(t, tc) })
	// Last: its crash-looping and OOM-killed containers keep the node busy.
	t.Run("pods", func(t *testing.T) { testPods(t, tc) })
}

// testKubectlStreams drives a real node's kubelet server through the API server with
// the real kubectl: logs, exec (output, exit code, stdin), cp and port-forward.
func testKubectlStreams(t *testing.T, tc *testCluster) {
	ctx := context.Background()
	ns := tc.Namespace("streams")
	run := func(stdin string, args ...string) (string, error) {
		cmd := testutil.KubectlCommand(t, tc.Kubeconfig(), append([]string{"-n", ns}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if _, err := tc.Client.CoreV1().Pods(ns).Create(ctx, busyboxPod(ns, "talker", corev1.RestartPolicyAlways,
		"echo hello from kubelab; echo to stderr >&2; sleep 3600"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	web := clustertest.SeedObject[*corev1.Pod](t, "20-pod.yaml")
	web.Name, web.Namespace, web.Spec.Volumes = "web", ns, nil
	web.Spec.Containers[0].VolumeMounts = nil
	if _, err := tc.Client.CoreV1().Pods(ns).Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tc.WaitPodRunning(ns, "talker")
	tc.WaitPodRunning(ns, "web")

	// stdout and stderr reach the log through separate pipes: their order may vary.
	var logs string
	testutil.EventuallyWithin(t, clustertest.Timeout, "kubectl logs talker", func() (bool, error) {
		out, err := run("", "logs", "talker")
		logs = out
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		sort.Strings(lines)
		if err == nil && strings.Join(lines, "|") == "hello from kubelab|to stderr" {
			return true, nil
		}
		return false, fmt.Errorf("kubectl logs: %v: %q", err, logs)
	})
	if out, err := run("", "exec", "talker", "--", "sh", "-c", "echo $((6*7))"); err != nil || out != "42\n" {
		t.Errorf("kubectl exec: %v %q", err, out)
	}
	if out, err := run("", "exec", "talker", "--", "sh", "-c", "exit 7"); err == nil || !strings.Contains(err.Error(), "exit status 7") {
		t.Errorf("kubectl exec of exit 7: %v %q, want exit status 7", err, out)
	}
	if out, err := run("from stdin\n", "exec", "-i", "talker", "--", "cat"); err != nil || out != "from stdin\n" {
		t.Errorf("kubectl exec -i: %v %q", err, out)
	}
	local := filepath.Join(t.TempDir(), "copied")
	if err := os.WriteFile(local, []byte("copied by kubectl cp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run("", "cp", local, "talker:/tmp/copied"); err != nil {
		t.Errorf("kubectl cp: %v %s", err, out)
	} else if out, err := run("", "exec", "talker", "--", "cat", "/tmp/copied"); err != nil || out != "copied by kubectl cp\n" {
		t.Errorf("file copied by kubectl cp: %v %q", err, out)
	}

	// Port-forward to nginx in the pod: a local port on 127.0.0.1 reaches port 80 in the
	// pod's network namespace.
	pf := testutil.KubectlCommand(t, tc.Kubeconfig(), "-n", ns, "port-forward", "pod/web", ":80")
	var pfOut apiservertest.SyncBuffer
	pf.Stdout, pf.Stderr = &pfOut, &pfOut
	if err := pf.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pf.Process.Kill(); pf.Wait() })
	var port string
	testutil.EventuallyWithin(t, clustertest.Timeout, "kubectl port-forward listening", func() (bool, error) {
		m := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 80`).FindStringSubmatch(pfOut.String())
		if m != nil {
			port = m[1]
		}
		return m != nil, nil
	})
	resp, err := http.Get("http://127.0.0.1:" + port + "/")
	if err != nil {
		t.Fatalf("through port-forward: %v\n%s", err, pfOut.String())
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "nginx") {
		t.Errorf("through port-forward: %d %q", resp.StatusCode, body)
	}

	// The kubelet listens where a kubelet on an EC2 instance does: the node's InternalIP,
	// port 10250, which the Node reports and the nodes/proxy subresource reaches by name.
	node, err := tc.Client.CoreV1().Nodes().Get(ctx, tc.Nodes()[0].Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if port := node.Status.DaemonEndpoints.KubeletEndpoint.Port; port != 10250 {
		t.Errorf("node %s: kubelet port %d, want 10250", node.Name, port)
	}
	for _, a := range node.Status.Addresses {
		if a.Address == "localhost" || a.Address == "127.0.0.1" {
			t.Errorf("node %s reports the machine's loopback as its address %s", node.Name, a.Type)
		}
	}
	pods, err := tc.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node.Name+":10250", "proxy", "pods").DoRaw(ctx)
	if err != nil || !strings.Contains(string(pods), `"name":"talker"`) {
		t.Errorf("nodes/%s:10250/proxy/pods: %v %.300s", node.Name, err, pods)
	}
	// Its metrics, as Prometheus and the e2e framework scrape them through nodes/proxy.
	for path, want := range map[string]string{
		"metrics":          `kubelet_node_name{node="` + node.Name + `"} 1`,
		"metrics/resource": `container_memory_working_set_bytes{container="main",namespace="` + ns + `",pod="talker"} `,
		"metrics/cadvisor": `container_cpu_usage_seconds_total{container="main",cpu="total",namespace="` + ns + `",pod="talker"} `,
		"metrics/probes":   "",
	} {
		out, err := tc.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node.Name+":10250", "proxy", path).DoRaw(ctx)
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("nodes/%s:10250/proxy/%s: %v %.500s; want %q", node.Name, path, err, out, want)
		}
	}
}

// testResizeInUse grows a claim while its pod runs on a real node. With
// CAP_SYS_RESOURCE the kubelet's NodeExpandVolume grows the mounted ext4 filesystem
// online; without it (some VMs and containers) the pod gets VolumeResizeFailed naming the
// reason and keeps running, and the filesystem grows at the next NodeStageVolume, when the
// pod is started again. Either way the container then sees 3 GiB at its mountPath.
func testResizeInUse(t *testing.T, tc *testCluster) {
	ctx := context.Background()
	pod, pvc := tc.growInUse("real-resize")
	if !hasCapSysResource(t) {
		testutil.EventuallyWithin(t, clustertest.Timeout, "VolumeResizeFailed naming CAP_SYS_RESOURCE", func() (bool, error) {
			for _, w := range tc.Warnings(pod.Namespace, pod.Name) {
				if strings.HasPrefix(w, "VolumeResizeFailed: ") && strings.Contains(w, "CAP_SYS_RESOURCE") {
					return true, nil
				}
			}
			return false, nil
		})
		tc.deletePodAndWait(pod.Namespace, pod.Name)
		again := clustertest.SeedObject[*corev1.Pod](t, "20-pod.yaml")
		again.Name, again.Namespace = pod.Name, pod.Namespace
		again.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = pvc.Name
		if _, err := tc.Client.CoreV1().Pods(pod.Namespace).Create(ctx, again, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod = tc.WaitPodRunning(pod.Namespace, pod.Name)
	}
	tc.waitResized(pod, pvc)
	pod, err := tc.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pid := tc.containerPID(pod, "my-container")
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Join("/proc", strconv.Itoa(pid), "root/usr/share/nginx/html"), &st); err != nil {
		t.Fatal(err)
	}
	if size := int64(st.Blocks) * st.Bsize; size < 2900<<20 || size > 3<<30 {
		t.Errorf("the container's filesystem holds %d bytes, want about 3 GiB", size)
	}
}

// hasCapSysResource says whether this process may grow a mounted ext4 filesystem.
func hasCapSysResource(t *testing.T) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<unix.CAP_SYS_RESOURCE) != 0
		}
	}
	return false
}

// TestRealPodDeletedWhileKubeletDown deletes a pod with a mounted volume while its
// node's kubelet is stopped: the restarted kubelet finds the volume it had published
// (vol_data.json), unpublishes and unstages it, and the pod goes; nothing of the volume
// stays mounted.
func TestRealPodDeletedWhileKubeletDown(t *testing.T) {
	t.Parallel()
	tc := startRealCluster(t, 1, "us-east-1a")
	ctx := context.Background()
	ns := tc.Namespace("kubelet-down")
	node := tc.Nodes()[0]
	_, pod := tc.seedPair(ns, "data", "app", "gp2")
	tc.WaitPodRunning(ns, pod.Name)
	claim, err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv := claim.Spec.VolumeName
	if ms := volumeMounts(t, tc.DataDir(), pv, ""); len(ms) < 2 {
		t.Fatalf("mounts of %s with the pod running: %d, want the global mount and the pod's", pv, len(ms))
	}
	if err := tc.Stop(ctx, "kubelet/"+node.Name); err != nil {
		t.Fatal(err)
	}
	if err := tc.Client.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := tc.Start(ctx, "kubelet/"+node.Name); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "pod app gone", func() (bool, error) {
		_, err := tc.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	testutil.EventuallyWithin(t, clustertest.Timeout, "nothing of the volume mounted on the node", func() (bool, error) {
		return len(volumeMounts(t, tc.DataDir(), pv, "")) == 0, nil
	})
}
