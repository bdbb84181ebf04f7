package flowtest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/util/volumeutil"
)

// Upstream names the test checks.
const (
	annSelectedNode       = "volume.kubernetes.io/selected-node"
	annStorageProvisioner = "volume.kubernetes.io/storage-provisioner"
	annBetaProvisioner    = "volume.beta.kubernetes.io/storage-provisioner"
	annProvisionedBy      = "pv.kubernetes.io/provisioned-by"
	annBindCompleted      = "pv.kubernetes.io/bind-completed"
	annBoundByController  = "pv.kubernetes.io/bound-by-controller"
	finProvisioner        = "external-provisioner.volume.kubernetes.io/finalizer"
	finAttacher           = "external-attacher/ebs-csi-aws-com"
	finPVC                = "kubernetes.io/pvc-protection"
	finPV                 = "kubernetes.io/pv-protection"
)

func (e *env) namespace(name string) string {
	if _, err := e.client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
	return name
}

func (e *env) storageClass(name string, mode storagev1.VolumeBindingMode, policy corev1.PersistentVolumeReclaimPolicy, params map[string]string) {
	if _, err := e.client.StorageV1().StorageClasses().Create(context.Background(), &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: driverName, Parameters: params,
		VolumeBindingMode: &mode, ReclaimPolicy: &policy, AllowVolumeExpansion: ptr.To(true),
	}, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) claim(ns, name, class, size string) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
	if class != "-" {
		pvc.Spec.StorageClassName = &class
	}
	out, err := e.client.CoreV1().PersistentVolumeClaims(ns).Create(context.Background(), pvc, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *env) pod(ns, name, claim string) *corev1.Pod {
	out, err := e.client.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "my-container", Image: "nginx",
				VolumeMounts: []corev1.VolumeMount{{Name: "my-persistent-storage", MountPath: "/usr/share/nginx/html"}}}},
			Volumes: []corev1.Volume{{Name: "my-persistent-storage", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *env) getClaim(ns, name string) *corev1.PersistentVolumeClaim {
	pvc, err := e.client.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return pvc
}

// selectNode plays the scheduler's VolumeBinding plugin for a WaitForFirstConsumer claim.
func (e *env) selectNode(ns, claim, node string) {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annSelectedNode: node}}})
	if _, err := e.client.CoreV1().PersistentVolumeClaims(ns).Patch(context.Background(), claim, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// bindPod plays the scheduler's bind step (pods/binding).
func (e *env) bindPod(ns, pod, node string) {
	if err := e.client.CoreV1().Pods(ns).Bind(context.Background(), &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// setVolumesInUse plays the kubelet's volume manager reporting what it mounted.
func (e *env) setVolumesInUse(node string, names ...corev1.UniqueVolumeName) {
	if names == nil {
		names = []corev1.UniqueVolumeName{}
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"volumesInUse": names}})
	if _, err := e.client.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		e.t.Fatal(err)
	}
}

// deletePod deletes a scheduled pod as the kubelet completes it: a graceful delete,
// then the grace-0 delete once "containers stopped".
func (e *env) deletePod(ns, name string) {
	ctx := context.Background()
	if err := e.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	if err := e.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil && !apierrors.IsNotFound(err) {
		e.t.Fatal(err)
	}
	testutil.EventuallyWithin(e.t, flowTimeout, "pod "+name+" gone", func() (bool, error) {
		_, err := e.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
}

func hasFinalizer(list []string, f string) bool {
	for _, x := range list {
		if x == f {
			return true
		}
	}
	return false
}

// TestClaimProvisionedBoundAttachedThenDeleted walks the storage flow with a gp2 class (WaitForFirstConsumer) and
// the claim my-app-pvc and pod my-app-pod of examples/seed, asserting each state
// transition (PVC Pending → Bound, PV Available → Bound, VolumeAttachment created →
// attached), then tears it down under reclaim policy Delete.
func TestClaimProvisionedBoundAttachedThenDeleted(t *testing.T) {
	e := newEnv(t)
	ctrl := e.startControllers()
	defer ctrl.stop(t)
	side := e.startSidecars()
	defer side.stop(t)
	ctx := context.Background()
	ns := e.namespace("claim-flow")
	e.storageClass("gp2", storagev1.VolumeBindingWaitForFirstConsumer, corev1.PersistentVolumeReclaimDelete, map[string]string{"type": "gp2"})

	// kubectl apply: the PVC is Pending and stays so until the pod is scheduled.
	pvc := e.claim(ns, "my-app-pvc", "gp2", "1Gi")
	e.pod(ns, "my-app-pod", "my-app-pvc")
	testutil.EventuallyWithin(t, flowTimeout, "WaitForFirstConsumer event and pvc-protection finalizer", func() (bool, error) {
		c := e.getClaim(ns, "my-app-pvc")
		return e.hasEvent(ns, "my-app-pvc", "WaitForFirstConsumer") && hasFinalizer(c.Finalizers, finPVC), nil
	})
	// The provisioner has every chance to misbehave: the claim stays as it is.
	pvName := "pvc-" + string(pvc.UID)
	testutil.Consistently(t, 500*time.Millisecond, "the claim untouched before scheduling", func() error {
		c := e.getClaim(ns, "my-app-pvc")
		if c.Status.Phase != corev1.ClaimPending || c.Spec.VolumeName != "" {
			return fmt.Errorf("phase %q volume %q, want Pending and none", c.Status.Phase, c.Spec.VolumeName)
		}
		if _, ok := c.Annotations[annStorageProvisioner]; ok {
			return fmt.Errorf("handed to the provisioner before a node was selected: %v", c.Annotations)
		}
		if vols := e.cloudVolumes(pvName); len(vols) != 0 {
			return fmt.Errorf("cloud volume created before scheduling: %v", vols)
		}
		return nil
	})

	// The scheduler picks node-b (us-east-1b) and sets selected-node.
	node := "node-b"
	e.selectNode(ns, "my-app-pvc", node)

	// PV controller hands the claim to the provisioner, which creates the volume in
	// the node's zone and the PV.
	var pv *corev1.PersistentVolume
	testutil.EventuallyWithin(t, flowTimeout, "PV "+pvName, func() (bool, error) {
		var err error
		pv, err = e.client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		return err == nil, err
	})
	c := e.getClaim(ns, "my-app-pvc")
	if c.Annotations[annStorageProvisioner] != driverName || c.Annotations[annBetaProvisioner] != driverName {
		t.Errorf("claim provisioner annotations = %v, want %s", c.Annotations, driverName)
	}
	if pv.Annotations[annProvisionedBy] != driverName {
		t.Errorf("PV %s = %q, want %s", annProvisionedBy, pv.Annotations[annProvisionedBy], driverName)
	}
	if !hasFinalizer(pv.Finalizers, finProvisioner) {
		t.Errorf("PV finalizers %v lack %s", pv.Finalizers, finProvisioner)
	}
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
		t.Errorf("PV claimRef = %+v, want claim uid %s", pv.Spec.ClaimRef, pvc.UID)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != driverName || !strings.HasPrefix(pv.Spec.CSI.VolumeHandle, "vol-") || pv.Spec.CSI.FSType != "ext4" {
		t.Fatalf("PV csi source = %+v", pv.Spec.CSI)
	}
	if got := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions; len(got) != 2 || got[0].Values[0] != "us-east-1b" {
		t.Errorf("PV node affinity = %+v, want zone us-east-1b", got)
	}
	vols := e.cloudVolumes(pvName)
	if len(vols) != 1 || aws.ToString(vols[0].VolumeId) != pv.Spec.CSI.VolumeHandle {
		t.Fatalf("cloud volumes named %s = %d, want exactly the PV's", pvName, len(vols))
	}
	if z := aws.ToString(vols[0].AvailabilityZone); z != "us-east-1b" || aws.ToInt32(vols[0].Size) != 1 || vols[0].VolumeType != ec2types.VolumeTypeGp2 {
		t.Errorf("cloud volume zone %s size %d type %s, want us-east-1b 1 gp2", z, aws.ToInt32(vols[0].Size), vols[0].VolumeType)
	}

	// Transition: PVC Pending → PV provisioned → Bound; PV → Bound.
	testutil.EventuallyWithin(t, flowTimeout, "claim Bound", func() (bool, error) {
		c = e.getClaim(ns, "my-app-pvc")
		return c.Status.Phase == corev1.ClaimBound, nil
	})
	if c.Spec.VolumeName != pvName || c.Annotations[annBindCompleted] != "yes" || c.Annotations[annBoundByController] != "yes" {
		t.Errorf("bound claim: volumeName %q annotations %v", c.Spec.VolumeName, c.Annotations)
	}
	if q := c.Status.Capacity[corev1.ResourceStorage]; q.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("claim capacity %s, want 1Gi", q.String())
	}
	testutil.EventuallyWithin(t, flowTimeout, "PV Bound with pv-protection", func() (bool, error) {
		pv, _ = e.client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		return pv != nil && pv.Status.Phase == corev1.VolumeBound && hasFinalizer(pv.Finalizers, finPV), nil
	})
	for _, r := range []string{"ExternalProvisioning", "Provisioning", "ProvisioningSucceeded"} {
		e.waitEvent(ns, "my-app-pvc", r)
	}

	// The scheduler binds the pod; the attach/detach controller creates the
	// VolumeAttachment and the attacher attaches it.
	e.bindPod(ns, "my-app-pod", node)
	vaName := volumeutil.AttachmentName(pv.Spec.CSI.VolumeHandle, driverName, node)
	var va *storagev1.VolumeAttachment
	testutil.EventuallyWithin(t, flowTimeout, "VolumeAttachment "+vaName+" attached", func() (bool, error) {
		var err error
		va, err = e.client.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{})
		return err == nil && va.Status.Attached, err
	})
	if va.Spec.Attacher != driverName || va.Spec.NodeName != node || ptr.Deref(va.Spec.Source.PersistentVolumeName, "") != pvName {
		t.Errorf("VolumeAttachment spec = %+v", va.Spec)
	}
	if dp := va.Status.AttachmentMetadata["devicePath"]; !strings.HasPrefix(dp, "/dev/xvd") {
		t.Errorf("attachmentMetadata = %v, want a devicePath /dev/xvd..", va.Status.AttachmentMetadata)
	}
	if !hasFinalizer(va.Finalizers, finAttacher) {
		t.Errorf("VolumeAttachment finalizers %v lack %s", va.Finalizers, finAttacher)
	}
	pv, _ = e.client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
	if !hasFinalizer(pv.Finalizers, finAttacher) {
		t.Errorf("PV finalizers %v lack %s", pv.Finalizers, finAttacher)
	}
	vols = e.cloudVolumes(pvName)
	if vols[0].State != ec2types.VolumeStateInUse || len(vols[0].Attachments) != 1 || aws.ToString(vols[0].Attachments[0].InstanceId) != e.instances[node] {
		t.Errorf("cloud volume state %s attachments %+v, want in-use on %s", vols[0].State, vols[0].Attachments, e.instances[node])
	}
	unique := volumeutil.UniqueVolumeName(driverName, pv.Spec.CSI.VolumeHandle)
	testutil.EventuallyWithin(t, flowTimeout, "node volumesAttached and SuccessfulAttachVolume", func() (bool, error) {
		n, err := e.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(n.Status.VolumesAttached) == 1 && n.Status.VolumesAttached[0].Name == unique &&
			e.hasEvent(ns, "my-app-pod", "SuccessfulAttachVolume"), nil
	})

	// The kubelet mounts it and reports it in use.
	e.setVolumesInUse(node, unique)

	// pvc-protection: deleting the claim while the pod uses it leaves it Terminating.
	if err := e.client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "my-app-pvc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Consistently(t, time.Second, "the claim in use kept Terminating", func() error {
		c := e.getClaim(ns, "my-app-pvc")
		if c.DeletionTimestamp == nil || !hasFinalizer(c.Finalizers, finPVC) || c.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("deletionTimestamp %v finalizers %v phase %s", c.DeletionTimestamp, c.Finalizers, c.Status.Phase)
		}
		return nil
	})

	// The pod goes; the volume stays attached while the node reports it in use.
	e.deletePod(ns, "my-app-pod")
	testutil.Consistently(t, time.Second, "VolumeAttachment kept while the node still uses the volume", func() error {
		_, err := e.client.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{})
		return err
	})
	// The kubelet unmounts: now it is detached.
	e.setVolumesInUse(node)
	testutil.EventuallyWithin(t, flowTimeout, "VolumeAttachment deleted", func() (bool, error) {
		_, err := e.client.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	testutil.EventuallyWithin(t, flowTimeout, "node volumesAttached empty", func() (bool, error) {
		n, err := e.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		return err == nil && len(n.Status.VolumesAttached) == 0, err
	})

	// Transition: PV Bound → PVC deleted → deleted (Delete): the claim goes, the PV is
	// Released, the provisioner deletes the cloud volume and the PV.
	testutil.EventuallyWithin(t, flowTimeout, "claim gone", func() (bool, error) {
		_, err := e.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "my-app-pvc", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	testutil.EventuallyWithin(t, flowTimeout, "PV gone", func() (bool, error) {
		_, err := e.client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	testutil.EventuallyWithin(t, flowTimeout, "cloud volume deleted", func() (bool, error) {
		vols := e.cloudVolumes(pvName)
		return len(vols) == 0 || vols[0].State == ec2types.VolumeStateDeleting || vols[0].State == ec2types.VolumeStateDeleted, nil
	})
}

// TestRetainReleased: an Immediate class with reclaim policy Retain provisions at
// once, and deleting the claim leaves the PV Released and the cloud volume in place.
func TestRetainReleased(t *testing.T) {
	e := newEnv(t)
	ctrl := e.startControllers()
	defer ctrl.stop(t)
	side := e.startSidecars()
	defer side.stop(t)
	ctx := context.Background()
	ns := e.namespace("retain")
	e.storageClass("gp3-retain", storagev1.VolumeBindingImmediate, corev1.PersistentVolumeReclaimRetain, map[string]string{"type": "gp3"})
	pvc := e.claim(ns, "data", "gp3-retain", "2Gi")
	pvName := "pvc-" + string(pvc.UID)
	testutil.EventuallyWithin(t, flowTimeout, "claim Bound", func() (bool, error) {
		return e.getClaim(ns, "data").Status.Phase == corev1.ClaimBound, nil
	})
	pv, err := e.client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain || hasFinalizer(pv.Finalizers, finProvisioner) {
		t.Errorf("retained PV: policy %s finalizers %v (no provisioner finalizer under Retain)", pv.Spec.PersistentVolumeReclaimPolicy, pv.Finalizers)
	}
	if err := e.client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, flowTimeout, "PV Released", func() (bool, error) {
		pv, err = e.client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		return err == nil && pv.Status.Phase == corev1.VolumeReleased, err
	})
	testutil.Consistently(t, time.Second, "the retained PV and its cloud volume kept", func() error {
		pv, err := e.client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		if err != nil || pv.Status.Phase != corev1.VolumeReleased {
			return fmt.Errorf("retained PV: %v %v", pv, err)
		}
		if vols := e.cloudVolumes(pvName); len(vols) != 1 || vols[0].State != ec2types.VolumeStateAvailable {
			return fmt.Errorf("retained cloud volume: %+v, want one available", vols)
		}
		return nil
	})
}

// TestStaticBinding: an administrator's PV is Available, and a matching claim without
// a class binds it (PV Available → PVC bound → Bound); the smallest fitting PV wins.
func TestStaticBinding(t *testing.T) {
	e := newEnv(t)
	ctrl := e.startControllers()
	defer ctrl.stop(t)
	ctx := context.Background()
	ns := e.namespace("static")
	mk := func(name, size string) {
		mode := corev1.PersistentVolumeFilesystem
		if _, err := e.client.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				VolumeMode:                    &mode,
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
					Driver: driverName, VolumeHandle: "vol-static-" + name, FSType: "ext4"}},
			},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("static-big", "10Gi")
	mk("static-small", "5Gi")
	for _, name := range []string{"static-big", "static-small"} {
		testutil.EventuallyWithin(t, flowTimeout, name+" Available", func() (bool, error) {
			pv, err := e.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
			return err == nil && pv.Status.Phase == corev1.VolumeAvailable, err
		})
	}
	e.claim(ns, "static-claim", "", "4Gi")
	testutil.EventuallyWithin(t, flowTimeout, "static claim Bound", func() (bool, error) {
		return e.getClaim(ns, "static-claim").Status.Phase == corev1.ClaimBound, nil
	})
	c := e.getClaim(ns, "static-claim")
	if c.Spec.VolumeName != "static-small" {
		t.Errorf("claim bound to %q, want the smallest fitting static-small", c.Spec.VolumeName)
	}
	if q := c.Status.Capacity[corev1.ResourceStorage]; q.Cmp(resource.MustParse("5Gi")) != 0 {
		t.Errorf("claim capacity %s, want the PV's 5Gi", q.String())
	}
	testutil.EventuallyWithin(t, flowTimeout, "static-small Bound", func() (bool, error) {
		pv, err := e.client.CoreV1().PersistentVolumes().Get(ctx, "static-small", metav1.GetOptions{})
		return err == nil && pv.Status.Phase == corev1.VolumeBound && pv.Annotations[annBoundByController] == "yes", err
	})
	big, _ := e.client.CoreV1().PersistentVolumes().Get(ctx, "static-big", metav1.GetOptions{})
	if big.Status.Phase != corev1.VolumeAvailable || big.Spec.ClaimRef != nil {
		t.Errorf("static-big: phase %s claimRef %v, want Available and free", big.Status.Phase, big.Spec.ClaimRef)
	}
	// A statically bound PV under Delete that nobody can delete fails once released.
	if err := e.client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "static-claim", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, flowTimeout, "static-small Released", func() (bool, error) {
		pv, err := e.client.CoreV1().PersistentVolumes().Get(ctx, "static-small", metav1.GetOptions{})
		return err == nil && pv.Status.Phase == corev1.VolumeReleased, err
	})
}
