package flowtest

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/kubelab/kubelab/internal/cloud"
	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/util/volumeutil"
)

func (e *env) startProvisioner() *running {
	return e.start(func(c kubernetes.Interface, f informers.SharedInformerFactory) []runner {
		return e.sidecars(c, f, true, false)
	})
}

func (e *env) startAttacher() *running {
	return e.start(func(c kubernetes.Interface, f informers.SharedInformerFactory) []runner {
		return e.sidecars(c, f, false, true)
	})
}

// TestRestartMidFlow stops the controllers and sidecars while the cloud is in the
// middle of creating, attaching and detaching (held there by injected faults), starts
// new ones, and checks that the flow converges with one cloud volume, one
// attachment while needed, and none left afterwards.
func TestRestartMidFlow(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ns := e.namespace("restart")
	e.storageClass("gp3", storagev1.VolumeBindingImmediate, corev1.PersistentVolumeReclaimDelete, nil)
	ctrl := e.startControllers()
	prov := e.startProvisioner()
	att := e.startAttacher()

	// 1. Killed while CreateVolume waits for the cloud.
	createHang, err := e.cloud.InjectFault(cloud.Fault{Action: "CreateVolume", Mode: "hang"})
	if err != nil {
		t.Fatal(err)
	}
	pvc := e.claim(ns, "data", "gp3", "1Gi")
	pvName := "pvc-" + string(pvc.UID)
	testutil.EventuallyWithin(t, flowTimeout, "cloud volume creating", func() (bool, error) {
		vols := e.cloudVolumes(pvName)
		return len(vols) == 1 && vols[0].State == ec2types.VolumeStateCreating, nil
	})
	prov.stop(t)
	ctrl.stop(t)
	ctrl = e.startControllers()
	prov = e.startProvisioner()
	e.cloud.ClearFaults(createHang)
	testutil.EventuallyWithin(t, flowTimeout, "claim Bound after restart", func() (bool, error) {
		return e.getClaim(ns, "data").Status.Phase == corev1.ClaimBound, nil
	})
	vols := e.cloudVolumes(pvName)
	if len(vols) != 1 {
		t.Fatalf("cloud volumes named %s after restart: %d, want 1", pvName, len(vols))
	}
	all, err := e.ec2.DescribeVolumes(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Volumes) != 1 {
		t.Fatalf("cloud has %d volumes, want 1", len(all.Volumes))
	}
	pv, err := e.client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.CSI.VolumeHandle != aws.ToString(vols[0].VolumeId) {
		t.Fatalf("PV handle %s, cloud volume %s", pv.Spec.CSI.VolumeHandle, aws.ToString(vols[0].VolumeId))
	}

	// 2. Killed while ControllerPublishVolume waits for the attachment.
	zone := aws.ToString(vols[0].AvailabilityZone)
	node := ""
	for i, z := range zones {
		if z == zone {
			node = e.nodes[i]
		}
	}
	attachHang, err := e.cloud.InjectFault(cloud.Fault{Action: "AttachVolume", Mode: "hang"})
	if err != nil {
		t.Fatal(err)
	}
	e.pod(ns, "app", "data")
	e.bindPod(ns, "app", node)
	testutil.EventuallyWithin(t, flowTimeout, "cloud attachment under way", func() (bool, error) {
		v := e.cloudVolumes(pvName)
		return len(v) == 1 && len(v[0].Attachments) == 1, nil
	})
	att.stop(t)
	ctrl.stop(t)
	ctrl = e.startControllers()
	att = e.startAttacher()
	e.cloud.ClearFaults(attachHang)
	vaName := volumeutil.AttachmentName(pv.Spec.CSI.VolumeHandle, driverName, node)
	testutil.EventuallyWithin(t, flowTimeout, "attached after restart", func() (bool, error) {
		va, err := e.client.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{})
		return err == nil && va.Status.Attached && va.Status.AttachmentMetadata["devicePath"] != "", err
	})
	vas, err := e.client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(vas.Items) != 1 {
		t.Fatalf("%d VolumeAttachments, want 1", len(vas.Items))
	}
	v := e.cloudVolumes(pvName)[0]
	if len(v.Attachments) != 1 || v.Attachments[0].State != ec2types.VolumeAttachmentStateAttached || aws.ToString(v.Attachments[0].InstanceId) != e.instances[node] {
		t.Fatalf("cloud attachments %+v, want one, attached, to %s", v.Attachments, e.instances[node])
	}

	// 3. The controller-manager is down while the pod goes and the node unmounts;
	// the attacher is killed while DetachVolume waits for the cloud.
	unique := volumeutil.UniqueVolumeName(driverName, pv.Spec.CSI.VolumeHandle)
	e.setVolumesInUse(node, unique)
	ctrl.stop(t)
	e.deletePod(ns, "app")
	e.setVolumesInUse(node)
	detachHang, err := e.cloud.InjectFault(cloud.Fault{Action: "DetachVolume", Mode: "hang"})
	if err != nil {
		t.Fatal(err)
	}
	ctrl = e.startControllers()
	testutil.EventuallyWithin(t, flowTimeout, "cloud detach under way", func() (bool, error) {
		v := e.cloudVolumes(pvName)
		return len(v) == 1 && len(v[0].Attachments) == 1 && v[0].Attachments[0].State == ec2types.VolumeAttachmentStateDetaching, nil
	})
	att.stop(t)
	att = e.startAttacher()
	e.cloud.ClearFaults(detachHang)
	testutil.EventuallyWithin(t, flowTimeout, "VolumeAttachment gone", func() (bool, error) {
		_, err := e.client.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	testutil.EventuallyWithin(t, flowTimeout, "cloud volume detached", func() (bool, error) {
		v := e.cloudVolumes(pvName)
		return len(v) == 1 && len(v[0].Attachments) == 0 && v[0].State == ec2types.VolumeStateAvailable, nil
	})
	n, err := e.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Status.VolumesAttached) != 0 {
		t.Fatalf("node still lists attached volumes %v", n.Status.VolumesAttached)
	}

	// 4. The cloud refuses DeleteVolume; the provisioner retries, is replaced, and
	// the next one deletes once the cloud accepts.
	deleteFail, err := e.cloud.InjectFault(cloud.Fault{Action: "DeleteVolume", Mode: "fail", Code: "RequestLimitExceeded"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, flowTimeout, "PV Released and VolumeFailedDelete", func() (bool, error) {
		pv, err := e.client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		return err == nil && pv.Status.Phase == corev1.VolumeReleased && e.hasEvent("", pvName, "VolumeFailedDelete"), err
	})
	prov.stop(t)
	prov = e.startProvisioner()
	e.cloud.ClearFaults(deleteFail)
	testutil.EventuallyWithin(t, flowTimeout, "PV gone", func() (bool, error) {
		_, err := e.client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	testutil.EventuallyWithin(t, flowTimeout, "cloud volume deleted", func() (bool, error) {
		v := e.cloudVolumes(pvName)
		return len(v) == 0 || v[0].State == ec2types.VolumeStateDeleted || v[0].State == ec2types.VolumeStateDeleting, nil
	})
	prov.stop(t)
	att.stop(t)
	ctrl.stop(t)
}
