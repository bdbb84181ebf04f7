package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/cluster"
	"github.com/kubelab/kubelab/internal/cluster/clustertest"
	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/util/volumeutil"
)

// Upstream names the tests check.
const (
	annSelectedNode  = "volume.kubernetes.io/selected-node"
	annProvisionedBy = "pv.kubernetes.io/provisioned-by"
	finPVC           = "kubernetes.io/pvc-protection"
	finPV            = "kubernetes.io/pv-protection"
)

// seedPair creates the PVC and Pod of examples/seed (10-pvc.yaml, 20-pod.yaml) in ns
// under the given names, the claim asking for class.
func (tc *testCluster) seedPair(ns, claim, pod, class string) (*corev1.PersistentVolumeClaim, *corev1.Pod) {
	t := tc.T
	t.Helper()
	ctx := context.Background()
	pvc := clustertest.SeedObject[*corev1.PersistentVolumeClaim](t, "10-pvc.yaml")
	pvc.Name, pvc.Namespace, pvc.Spec.StorageClassName = claim, ns, &class
	pvc, err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := clustertest.SeedObject[*corev1.Pod](t, "20-pod.yaml")
	p.Name, p.Namespace = pod, ns
	p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = claim
	if p, err = tc.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return pvc, p
}

// deletePodAndWait deletes the pod and waits until the kubelet has completed it.
func (tc *testCluster) deletePodAndWait(ns, name string) {
	tc.T.Helper()
	ctx := context.Background()
	if err := tc.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		tc.T.Fatal(err)
	}
	testutil.EventuallyWithin(tc.T, clustertest.Timeout, "pod "+name+" gone", func() (bool, error) {
		_, err := tc.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// TestClaimProvisionedAttachedMountedAndPodRunning runs the storage flow on a hollow cluster — the real
// API server, controller-manager, scheduler, CSI controller and sidecars, cloud and
// hollow kubelets, each on its wire — from `kubectl apply` of the PVC and Pod of
// examples/seed (default class gp2) to the pod running with its volume, and asserts each
// key state transition of the claim, the PV and the VolumeAttachment (provisioned,
// bound, attached, released under Retain, deleted under Delete) from the states the API
// server's watch showed.
func TestClaimProvisionedAttachedMountedAndPodRunning(t *testing.T) {
	tc := startCluster(t, nil)
	tl := startTimeline(t, tc.Client)
	ctx := context.Background()
	ns := tc.Namespace("claim-flow")

	// The gp2 class of examples/seed is the cluster's default class.
	sc, err := tc.Client.StorageV1().StorageClasses().Get(ctx, "gp2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seedSC := clustertest.SeedObject[*storagev1.StorageClass](t, "00-storageclass-gp2.yaml")
	if sc.Provisioner != seedSC.Provisioner || *sc.VolumeBindingMode != *seedSC.VolumeBindingMode || sc.Annotations[cluster.AnnDefaultStorageClass] != "true" {
		t.Fatalf("default class gp2 = %s %s %v, want examples/seed's (%s %s) marked default", sc.Provisioner, *sc.VolumeBindingMode, sc.Annotations,
			seedSC.Provisioner, *seedSC.VolumeBindingMode)
	}
	retain := corev1.PersistentVolumeReclaimRetain
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	if _, err := tc.Client.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gp2-retain"}, Provisioner: cluster.DriverName,
		ReclaimPolicy: &retain, VolumeBindingMode: &wffc,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// kubectl apply of examples/seed: the PVC (Pending, WaitForFirstConsumer) and the Pod.
	pvc, _ := tc.seedPair(ns, "my-app-pvc", "my-app-pod", "gp2")
	pod := tc.WaitPodRunning(ns, "my-app-pod")
	node := pod.Spec.NodeName
	pvc, err = tc.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "my-app-pvc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pvName := "pvc-" + string(pvc.UID)
	// The transitions depend on each other, so they are steps of one test, not subtests.
	step := func(row string, f func()) {
		t.Helper()
		t.Logf("row: %s", row)
		f()
	}

	step("PVC Pending until the pod is scheduled, then PV provisioned and Bound", func() {
		// Pending without a node, Pending with the scheduler's node, Bound to its volume.
		tl.expectOrder(t, "pvc/"+ns+"/my-app-pvc", "Pending", "Pending+node", "Bound+node+volume")
		if got := pvc.Annotations[annSelectedNode]; got != node {
			t.Errorf("selected-node %q, pod scheduled to %q", got, node)
		}
		testutil.EventuallyWithin(t, clustertest.Timeout, "WaitForFirstConsumer and ProvisioningSucceeded events on the claim", func() (bool, error) {
			return tc.HasEvent(ns, "my-app-pvc", "WaitForFirstConsumer") && tc.HasEvent(ns, "my-app-pvc", "ProvisioningSucceeded"), nil
		})
		// The binding cycle waits out the provisioning instead of failing on its own
		// selected-node write read back from a stale cache. (A pod seen before its claim
		// may still meet "persistentvolumeclaim not found" once, as upstream.)
		for _, w := range tc.Warnings(ns, "my-app-pod") {
			if strings.Contains(w, "selectedNode annotation reset") {
				t.Errorf("warning event on the seed's pod: %q", w)
			}
		}
		if !slices.Contains(pvc.Finalizers, finPVC) {
			t.Errorf("claim finalizers %v lack %s", pvc.Finalizers, finPVC)
		}
		pv, err := tc.Client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pv.Annotations[annProvisionedBy] != cluster.DriverName || pv.Status.Phase != corev1.VolumeBound || !slices.Contains(pv.Finalizers, finPV) {
			t.Errorf("PV: provisioned-by %q phase %s finalizers %v", pv.Annotations[annProvisionedBy], pv.Status.Phase, pv.Finalizers)
		}
		vols := tc.CloudVolumes(pvName)
		if len(vols) != 1 || aws.ToString(vols[0].VolumeId) != pv.Spec.CSI.VolumeHandle {
			t.Fatalf("cloud volumes for %s: %d, want exactly the PV's", pvName, len(vols))
		}
		if z := aws.ToString(vols[0].AvailabilityZone); z != tc.ZoneOf[node] {
			t.Errorf("volume in %s, the pod's node %s is in %s", z, node, tc.ZoneOf[node])
		}
	})

	var vaName string
	step("VolumeAttachment created, then attached by ControllerPublishVolume", func() {
		pv, err := tc.Client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		vaName = volumeutil.AttachmentName(pv.Spec.CSI.VolumeHandle, cluster.DriverName, node)
		tl.expectOrder(t, "va/"+vaName, "attached=false", "attached=true")
		va, err := tc.Client.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if dp := va.Status.AttachmentMetadata["devicePath"]; !strings.HasPrefix(dp, "/dev/xvd") {
			t.Errorf("attachmentMetadata %v, want devicePath /dev/xvd..", va.Status.AttachmentMetadata)
		}
		vols := tc.CloudVolumes(pvName)
		if len(vols) != 1 || vols[0].State != ec2types.VolumeStateInUse || len(vols[0].Attachments) != 1 ||
			aws.ToString(vols[0].Attachments[0].InstanceId) != tc.instanceOf(node) {
			t.Errorf("cloud volume %+v, want in-use on %s", vols, tc.instanceOf(node))
		}
		n, err := tc.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		unique := volumeutil.UniqueVolumeName(cluster.DriverName, pv.Spec.CSI.VolumeHandle)
		if !slices.Contains(n.Status.VolumesInUse, unique) {
			t.Errorf("node volumesInUse %v lack %s", n.Status.VolumesInUse, unique)
		}
		testutil.EventuallyWithin(t, clustertest.Timeout, "SuccessfulAttachVolume event on the pod", func() (bool, error) {
			return tc.HasEvent(ns, "my-app-pod", "SuccessfulAttachVolume"), nil
		})
	})

	step("PV Available, then Bound when a claim binds it", func() {
		// An administrator's PV for an existing cloud volume in the first node's zone.
		zone := tc.Nodes()[0].Zone
		out, err := tc.EC2.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(zone), Size: aws.Int32(2),
			VolumeType: ec2types.VolumeTypeGp3})
		if err != nil {
			t.Fatal(err)
		}
		mode := corev1.PersistentVolumeFilesystem
		static := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "static-pv"},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				VolumeMode:                    &mode,
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
					Driver: cluster.DriverName, VolumeHandle: aws.ToString(out.VolumeId), FSType: "ext4"}},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone",
						Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}}}}},
			},
		}
		if _, err := tc.Client.CoreV1().PersistentVolumes().Create(ctx, static, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		testutil.EventuallyWithin(t, clustertest.Timeout, "static PV Available", func() (bool, error) {
			pv, err := tc.Client.CoreV1().PersistentVolumes().Get(ctx, "static-pv", metav1.GetOptions{})
			return err == nil && pv.Status.Phase == corev1.VolumeAvailable, err
		})
		tc.seedPair(ns, "static-claim", "static-pod", "")
		p := tc.WaitPodRunning(ns, "static-pod")
		tl.expectOrder(t, "pv/static-pv", "Pending", "Available", "Bound")
		tl.expectOrder(t, "pvc/"+ns+"/static-claim", "Pending", "Bound+volume")
		if tc.ZoneOf[p.Spec.NodeName] != zone {
			t.Errorf("pod of the zone-%s volume runs on %s in %s", zone, p.Spec.NodeName, tc.ZoneOf[p.Spec.NodeName])
		}
	})

	step("PVC stays Bound when its pod terminates; PVC deleted under Retain leaves the PV Released", func() {
		rpvc, _ := tc.seedPair(ns, "retain-pvc", "retain-pod", "gp2-retain")
		tc.WaitPodRunning(ns, "retain-pod")
		rpv := "pvc-" + string(rpvc.UID)
		tc.deletePodAndWait(ns, "retain-pod")
		testutil.EventuallyWithin(t, clustertest.Timeout, "retained volume detached", func() (bool, error) {
			vols := tc.CloudVolumes(rpv)
			return len(vols) == 1 && vols[0].State == ec2types.VolumeStateAvailable, nil
		})
		c, err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "retain-pvc", metav1.GetOptions{})
		if err != nil || c.Status.Phase != corev1.ClaimBound {
			t.Fatalf("claim after its pod terminated: %v %v, want Bound", c.Status.Phase, err)
		}
		if pv, err := tc.Client.CoreV1().PersistentVolumes().Get(ctx, rpv, metav1.GetOptions{}); err != nil || pv.Status.Phase != corev1.VolumeBound {
			t.Fatalf("PV after the pod terminated: %v, want Bound", err)
		}
		if err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "retain-pvc", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testutil.EventuallyWithin(t, clustertest.Timeout, "retained PV Released", func() (bool, error) {
			pv, err := tc.Client.CoreV1().PersistentVolumes().Get(ctx, rpv, metav1.GetOptions{})
			return err == nil && pv.Status.Phase == corev1.VolumeReleased, err
		})
		// Nothing deletes the PV or its volume after a while either.
		testutil.Consistently(t, time.Second, "retained PV "+rpv+" and its cloud volume kept", func() error {
			if slices.Contains(tl.of("pv/"+rpv), "deleted") {
				return errors.New("the retained PV was deleted")
			}
			if vols := tc.CloudVolumes(rpv); len(vols) != 1 || vols[0].State != ec2types.VolumeStateAvailable {
				return fmt.Errorf("retained cloud volume: %+v, want one, available", vols)
			}
			return nil
		})
		tl.expectOrder(t, "pv/"+rpv, "Pending", "Bound", "Released")
	})

	step("PVC deleted under Delete: PV and cloud volume deleted", func() {
		tc.deletePodAndWait(ns, "my-app-pod")
		testutil.EventuallyWithin(t, clustertest.Timeout, "VolumeAttachment deleted", func() (bool, error) {
			_, err := tc.Client.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		tl.expectOrder(t, "va/"+vaName, "attached=false", "attached=true", "deleted")
		if err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "my-app-pvc", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testutil.EventuallyWithin(t, clustertest.Timeout, "PV deleted", func() (bool, error) {
			_, err := tc.Client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		testutil.EventuallyWithin(t, clustertest.Timeout, "cloud volume deleted", func() (bool, error) {
			vols := tc.CloudVolumes(pvName)
			return len(vols) == 0 || vols[0].State == ec2types.VolumeStateDeleted, nil
		})
		tl.expectOrder(t, "pv/"+pvName, "Pending", "Bound", "Released", "deleted")
		tl.expectOrder(t, "pvc/"+ns+"/my-app-pvc", "Pending", "Pending+node", "Bound+node+volume", "deleted")
	})

	step("nothing left attached", func() {
		tc.deletePodAndWait(ns, "static-pod")
		testutil.EventuallyWithin(t, clustertest.Timeout, "no attachments in the cloud", func() (bool, error) { return len(tc.AttachedVolumes()) == 0, nil })
		testutil.EventuallyWithin(t, clustertest.Timeout, "no VolumeAttachments", func() (bool, error) {
			vas, err := tc.Client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
			return err == nil && len(vas.Items) == 0, err
		})
	})
	if t.Failed() {
		t.Logf("timeline: %s", tl)
	}
}

// instanceOf is the instance id of the named node.
func (tc *testCluster) instanceOf(node string) string {
	for _, n := range tc.Nodes() {
		if n.Name == node {
			return n.InstanceID
		}
	}
	return ""
}
