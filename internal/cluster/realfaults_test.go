package cluster_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/cloud"
	"github.com/kubelab/kubelab/internal/cluster"
	"github.com/kubelab/kubelab/internal/cluster/clustertest"
	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/trace"
)

// TestRealVolumeFaults: a volume whose attach fails and one whose mount fails keep their
// pods ContainerCreating with upstream's reasons (FailedAttachVolume, FailedMount), and
// deleting the pods leaves nothing mounted.
func TestRealVolumeFaults(t *testing.T) {
	t.Parallel()
	tc := startRealCluster(t, 1, "us-east-1a")
	ctx := context.Background()
	ns := tc.Namespace("real-faults")

	// Attach fails in the cloud.
	fault, err := tc.Cloud().InjectFault(cloud.Fault{Action: "AttachVolume", Mode: "fail", Code: "InternalError", Message: "kubelab test: attach refused"})
	if err != nil {
		t.Fatal(err)
	}
	tc.seedPair(ns, "attach-claim", "attach-pod", "gp2")
	testutil.EventuallyWithin(t, clustertest.Timeout, "FailedAttachVolume event of attach-pod", func() (bool, error) { return tc.HasEvent(ns, "attach-pod", "FailedAttachVolume"), nil })
	tc.expectWhy(ns, "attach-pod", trace.StageAttach, "kubelab test: attach refused")
	tc.Cloud().ClearFaults(fault)
	assertContainerCreating(t, tc, ns, "attach-pod")
	tc.deletePodAndWait(ns, "attach-pod")

	// Stage fails on the node: mkfs.ext4 refuses an inode size of 100 bytes.
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "kubelab-badinode"}, Provisioner: cluster.DriverName,
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		Parameters:        map[string]string{"inodeSize": "100"}}
	if _, err := tc.Client.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tc.seedPair(ns, "mount-claim", "mount-pod", "kubelab-badinode")
	var msg string
	testutil.EventuallyWithin(t, clustertest.Timeout, "FailedMount event of mount-pod", func() (bool, error) {
		for _, w := range tc.Warnings(ns, "mount-pod") {
			if strings.HasPrefix(w, "FailedMount: MountVolume.MountDevice failed for volume ") {
				msg = w
				return true, nil
			}
		}
		return false, nil
	})
	if !strings.Contains(msg, "inode size 100") {
		t.Errorf("FailedMount message %q does not say what mkfs refused", msg)
	}
	tc.expectWhy(ns, "mount-pod", trace.StageMount, "inode size 100")
	assertContainerCreating(t, tc, ns, "mount-pod")
	tc.deletePodAndWait(ns, "mount-pod")
	for _, claim := range []string{"attach-claim", "mount-claim"} {
		c, err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Spec.VolumeName == "" {
			t.Fatalf("claim %s is not bound", claim)
		}
		if ms := volumeMounts(t, tc.DataDir(), c.Spec.VolumeName, ""); len(ms) != 0 {
			t.Fatalf("mounts of %s's volume left after the pods went: %s", claim, ms[0].Mountpoint)
		}
	}
}

// assertContainerCreating checks that the pod is Pending with its container waiting in
// ContainerCreating.
func assertContainerCreating(t *testing.T, tc *testCluster, ns, name string) {
	t.Helper()
	p, err := tc.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodPending || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Waiting == nil ||
		p.Status.ContainerStatuses[0].State.Waiting.Reason != "ContainerCreating" {
		t.Errorf("pod %s: phase %s, containers %+v; want Pending, ContainerCreating", name, p.Status.Phase, p.Status.ContainerStatuses)
	}
}
