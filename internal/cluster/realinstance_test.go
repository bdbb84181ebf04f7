package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/cluster"
	"github.com/kubelab/kubelab/internal/cluster/clustertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// TestRealInstanceTerminated: the cloud-controller-manager initialized the real nodes
// (provider id, instance type, zone and region from their instances, the uninitialized
// taint gone). Stopping and starting a node's instance powers the node off (the shutdown
// taint) and boots it again, its pod running again. Terminating the instance of the node that runs a Deployment's pod with a
// claim powers the node off, the cloud-controller-manager deletes its Node, the pod
// garbage collector its pod, and the Deployment's new pod runs on the other node with the
// claim's volume, attached there, its data intact.
func TestRealInstanceTerminated(t *testing.T) {
	t.Parallel()
	tc := startRealClusterWith(t, func(c *cluster.Config) {
		c.NodeMonitorGracePeriod, c.PodGCQuarantine = 10*time.Second, 5*time.Second
	}, 2, "us-east-1a")
	ctx := context.Background()
	ns := tc.Namespace("terminated")
	nodes := tc.Nodes()
	for _, n := range nodes {
		node, err := tc.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if node.Spec.ProviderID != "aws:///us-east-1a/"+n.InstanceID || node.Labels[corev1.LabelInstanceTypeStable] == "" ||
			node.Labels[corev1.LabelTopologyZone] != "us-east-1a" || node.Labels[corev1.LabelTopologyRegion] != "us-east-1" {
			t.Errorf("node %s not initialized from its instance: providerID %q, labels %v", n.Name, node.Spec.ProviderID, node.Labels)
		}
		if slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == "node.cloudprovider.kubernetes.io/uninitialized" }) {
			t.Errorf("node %s still uninitialized", n.Name)
		}
	}

	pvc := clustertest.SeedObject[*corev1.PersistentVolumeClaim](t, "10-pvc.yaml")
	pvc.Namespace = ns
	if _, err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tmpl := clustertest.SeedObject[*corev1.Pod](t, "20-pod.yaml")
	tmpl.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = pvc.Name
	labels := map[string]string{"app": "survivor"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "survivor", Namespace: ns}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: tmpl.Spec}}}
	if _, err := tc.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := tc.runningPodOf(ns, "app=survivor", "")
	pid := tc.containerPID(first, "my-container")
	file := filepath.Join("/proc", strconv.Itoa(pid), "root/usr/share/nginx/html/index.html")
	if err := os.WriteFile(file, []byte("still here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var doomed, survivor cluster.Node
	for _, n := range nodes {
		if n.Name == first.Spec.NodeName {
			doomed = n
		} else {
			survivor = n
		}
	}

	before := first.Status.ContainerStatuses[0].ContainerID
	// Stopped, the node powers off and gets the shutdown taint; started again, it boots,
	// is Ready without the taint and runs its pod again with the volume.
	if _, err := tc.EC2.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{doomed.InstanceID}}); err != nil {
		t.Fatal(err)
	}
	shutdown := func(n *corev1.Node) bool {
		return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == "node.cloudprovider.kubernetes.io/shutdown" })
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "node "+doomed.Name+" tainted shut down", func() (bool, error) {
		n, err := tc.Client.CoreV1().Nodes().Get(ctx, doomed.Name, metav1.GetOptions{})
		return err == nil && shutdown(n), err
	})
	if _, err := tc.EC2.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{doomed.InstanceID}}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "node "+doomed.Name+" Ready without the shutdown taint", func() (bool, error) {
		n, err := tc.Client.CoreV1().Nodes().Get(ctx, doomed.Name, metav1.GetOptions{})
		return err == nil && !shutdown(n) && tc.nodeReady(doomed.Name).Status == corev1.ConditionTrue, err
	})
	testutil.EventuallyWithin(t, clustertest.Timeout, "the pod running again after the boot", func() (bool, error) {
		p, err := tc.Client.CoreV1().Pods(ns).Get(ctx, first.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.ContainerID != before && cs.State.Running != nil && cs.Ready {
				return true, nil
			}
		}
		return false, nil
	})

	if _, err := tc.EC2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{doomed.InstanceID}}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "node "+doomed.Name+" deleted", func() bool {
		_, err := tc.Client.CoreV1().Nodes().Get(ctx, doomed.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if !tc.HasEvent("", doomed.Name, "DeletingNode") {
		t.Error("no DeletingNode event for the node of the terminated instance")
	}
	// The pod garbage collector waits PodGCQuarantine before it deletes the pods of a gone node.
	second := tc.runningPodOf(ns, "app=survivor", first.Name)
	if second.Spec.NodeName != survivor.Name {
		t.Fatalf("the new pod runs on %s, want %s", second.Spec.NodeName, survivor.Name)
	}
	pid = tc.containerPID(second, "my-container")
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "root/usr/share/nginx/html/index.html"))
	if err != nil || string(b) != "still here\n" {
		t.Fatalf("the volume on %s holds %q (%v), want the file written on %s", survivor.Name, b, err, doomed.Name)
	}
	for _, a := range tc.AttachedVolumes() {
		if strings.HasSuffix(a, "@"+doomed.InstanceID) {
			t.Errorf("a volume still attached to the terminated instance: %s", a)
		}
	}
}

// runningPodOf waits for a Running and Ready pod of the selector other than not.
func (tc *testCluster) runningPodOf(ns, selector, not string) *corev1.Pod {
	tc.T.Helper()
	var found *corev1.Pod
	testutil.EventuallyWithin(tc.T, 3*clustertest.Timeout/2, "a running pod of "+selector, func() (bool, error) {
		pods, err := tc.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		for i, p := range pods.Items {
			if p.Name != not && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				found = &pods.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	return found
}
