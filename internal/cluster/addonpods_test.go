package cluster_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/cloud"
	"github.com/kubelab/kubelab/internal/cluster"
	"github.com/kubelab/kubelab/internal/cluster/clustertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// kubectlSh runs a shell command line that calls kubectl (the test's, testutil.KubectlDir,
// with the cluster's kubeconfig in KUBECONFIG), as a user types it, and returns its
// output.
func (tc *testCluster) kubectlSh(line string) string {
	tc.T.Helper()
	cmd := exec.Command("sh", "-c", line)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+tc.Kubeconfig(), "KUBECTL_KUBERC=false",
		"PATH="+testutil.KubectlDir(tc.T)+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		tc.T.Fatalf("%s: %v\n%s", line, err, out)
	}
	return string(out)
}

// TestAddonPods: the EBS CSI add-on shows as the kube-system pods EKS has, and the
// add-on's debugging commands, verbatim with the real kubectl, print its containers'
// log lines about the test's volume. Deleting the controller pod while claims are being
// provisioned restarts its containers under a new pod, and each claim still gets
// exactly one volume.
func TestAddonPods(t *testing.T) {
	tc := startCluster(t, nil)
	ctx := context.Background()
	ns := tc.Namespace("addon-pods")
	tc.seedPair(ns, "my-app-pvc", "my-app-pod", "gp2")
	tc.WaitPodRunning(ns, "my-app-pod")
	pvc, err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "my-app-pvc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := tc.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	handle := pv.Spec.CSI.VolumeHandle

	attacher := tc.kubectlSh(`kubectl logs -n kube-system -l app=ebs-csi-controller -c csi-attacher --tail=50`)
	if !containsLine(attacher, "attached", handle) {
		t.Errorf("csi-attacher log has no line about attaching %s:\n%s", handle, attacher)
	}
	plugin := tc.kubectlSh(`kubectl logs -n kube-system -l app=ebs-csi-controller -c ebs-plugin --tail=100`)
	for _, call := range []string{"CreateVolume: done", "ControllerPublishVolume: done"} {
		if !containsLine(plugin, call, handle) {
			t.Errorf("ebs-plugin log has no %q line for %s:\n%s", call, handle, plugin)
		}
	}

	// On a hollow node the node plugin is the kubelet's stand-in mounter.
	node := tc.kubectlSh(`kubectl get pod my-app-pod -n ` + ns + ` -o jsonpath='{.spec.nodeName}'`)
	staged := tc.kubectlSh(`NODE=` + node + `
kubectl logs -n kube-system $(kubectl get pod -n kube-system -l app=ebs-csi-node \
    --field-selector spec.nodeName=$NODE -o jsonpath='{.items[0].metadata.name}') -c ebs-plugin`)
	for _, line := range []string{"NodeStageVolume: done", "NodePublishVolume: done"} {
		if !containsLine(staged, line, handle) {
			t.Errorf("node ebs-plugin log on %s has no %q line for %s:\n%s", node, line, handle, staged)
		}
	}

	tc.killControllerMidFlow(ns)
}

// killControllerMidFlow deletes the ebs-csi-controller pods (`kubectl delete pod`) while
// two claims of namespace ns are being provisioned (their volumes made in the cloud, which
// holds CreateVolume's answer): the claims' pods run, each claim with one cloud volume, and
// new controller pods take the deleted ones' place.
func (tc *testCluster) killControllerMidFlow(ns string) {
	t := tc.T
	t.Helper()
	ctx := context.Background()
	before := strings.Fields(tc.kubectlSh(`kubectl get pod -n kube-system -l app=ebs-csi-controller -o jsonpath='{.items[*].metadata.name}'`))
	fault, err := tc.Cloud().InjectFault(cloud.Fault{Action: "CreateVolume", Mode: "hang"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		c, _ := tc.seedPair(ns, fmt.Sprintf("claim-%d", i), fmt.Sprintf("pod-%d", i), "gp2")
		testutil.EventuallyWithin(t, clustertest.Timeout, "the volume of "+c.Name+" creating in the cloud", func() (bool, error) {
			return len(tc.CloudVolumes("pvc-"+string(c.UID))) == 1, nil
		})
	}
	tc.kubectlSh(`kubectl delete pod -n kube-system -l app=ebs-csi-controller --wait=false`)
	tc.Cloud().ClearFaults(fault)
	for i := range 2 {
		tc.WaitPodRunning(ns, fmt.Sprintf("pod-%d", i))
		c, err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, fmt.Sprintf("claim-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if vols := tc.CloudVolumes(c.Spec.VolumeName); len(vols) != 1 {
			t.Errorf("claim-%d has %d cloud volumes, want 1", i, len(vols))
		}
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "new ebs-csi-controller pods in place of the deleted ones", func() (bool, error) {
		after := strings.Fields(tc.kubectlSh(`kubectl get pod -n kube-system -l app=ebs-csi-controller -o jsonpath='{.items[*].metadata.name}'`))
		for _, p := range after {
			if slices.Contains(before, p) {
				return false, nil
			}
		}
		return len(after) == len(before), nil
	})
	testutil.EventuallyWithin(t, clustertest.Timeout, "the new pod's csi-provisioner log shows its start", func() (bool, error) {
		got := tc.kubectlSh(`kubectl logs -n kube-system -l app=ebs-csi-controller -c csi-provisioner --tail=200`)
		return strings.Contains(got, `] "started"`), nil
	})
}

// assertAddonPodsHealthy checks the add-on's pods on real nodes: each node plugin's
// liveness probe answers /healthz on 127.0.0.1:9808 in its node's namespace, each
// controller pod's in the pod, and no add-on pod has a container restart or a probe
// failure (Unhealthy) to show.
func (tc *testCluster) assertAddonPodsHealthy() {
	t := tc.T
	t.Helper()
	for _, n := range tc.Nodes() {
		if out, err := httpVia(tc.VPC().NodePath(n.Name), "http://127.0.0.1:9808/healthz"); err != nil || out != "ok" {
			t.Errorf("node plugin's /healthz on %s: %v %q", n.Name, err, out)
		}
	}
	pods, err := tc.Client.CoreV1().Pods(metav1.NamespaceSystem).List(context.Background(), metav1.ListOptions{LabelSelector: "app in (ebs-csi-controller, ebs-csi-node)"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Labels["app"] == cluster.AppCSIController && p.DeletionTimestamp == nil {
			if out := tc.kubectlSh(`kubectl exec -n kube-system ` + p.Name + ` -c liveness-probe -- wget -qO- http://127.0.0.1:9808/healthz`); strings.TrimSpace(out) != "ok" {
				t.Errorf("controller pod %s's /healthz: %q", p.Name, out)
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount > 0 {
				t.Errorf("add-on pod %s: container %s restarted %d times (last state %+v)", p.Name, cs.Name, cs.RestartCount, cs.LastTerminationState)
			}
		}
		for _, w := range tc.Warnings(metav1.NamespaceSystem, p.Name) {
			if strings.HasPrefix(w, "Unhealthy") || strings.HasPrefix(w, "BackOff") {
				t.Errorf("add-on pod %s: %s", p.Name, w)
			}
		}
	}
}

// containsLine tells whether some line of out holds all of words.
func containsLine(out string, words ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		all := true
		for _, w := range words {
			all = all && strings.Contains(line, w)
		}
		if all {
			return true
		}
	}
	return false
}

// assertAddonCommands runs the EBS CSI add-on's debugging commands for the running pod
// and its volume pv verbatim with the real kubectl: the attacher's and the controller
// plugin's logs show the volume attached, the node plugin's on the pod's node show it
// staged.
func (tc *testCluster) assertAddonCommands(pod *corev1.Pod, pv string) {
	t := tc.T
	t.Helper()
	p, err := tc.Client.CoreV1().PersistentVolumes().Get(context.Background(), pv, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	handle := p.Spec.CSI.VolumeHandle
	if out := tc.kubectlSh(`kubectl logs -n kube-system -l app=ebs-csi-controller -c csi-attacher --tail=50`); !containsLine(out, "attached", handle) {
		t.Errorf("csi-attacher log has no line about attaching %s:\n%s", handle, out)
	}
	if out := tc.kubectlSh(`kubectl logs -n kube-system -l app=ebs-csi-controller -c ebs-plugin --tail=100`); !containsLine(out, "ControllerPublishVolume: done", handle) {
		t.Errorf("controller ebs-plugin log has no ControllerPublishVolume line for %s:\n%s", handle, out)
	}
	out := tc.kubectlSh(`NODE=` + pod.Spec.NodeName + `
kubectl logs -n kube-system $(kubectl get pod -n kube-system -l app=ebs-csi-node \
    --field-selector spec.nodeName=$NODE -o jsonpath='{.items[0].metadata.name}') -c ebs-plugin`)
	for _, line := range []string{"NodeStageVolume: called", "NodeStageVolume: done", "NodePublishVolume: done"} {
		if !containsLine(out, line, handle) {
			t.Errorf("node ebs-plugin log on %s has no %q line for %s:\n%s", pod.Spec.NodeName, line, handle, out)
		}
	}
}
