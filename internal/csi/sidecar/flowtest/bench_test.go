package flowtest

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/benchtest"
	"github.com/kubelab/kubelab/internal/cloud/cloudtest"
	"github.com/kubelab/kubelab/internal/util/volumeutil"
)

// BenchmarkClaimToAttached measures, per claim, the storage control plane
// from "PVC and Pod created" (the scheduler's choices made up front:
// selected-node on the claim, spec.nodeName on the pod) to "VolumeAttachment
// attached": PV controller → provisioner → CreateVolume → PV → binding →
// attach/detach controller → VolumeAttachment → attacher → ControllerPublishVolume.
// The reference, BenchmarkClaimToAttachedBareCSI, makes the same two CSI calls
// straight on the driver's socket against the same hollow cloud.
func BenchmarkClaimToAttached(b *testing.B) {
	e := newEnv(b)
	e.log = cloudtest.Logger(b, slog.LevelWarn)
	ctrl := e.startControllers()
	defer ctrl.stop(b)
	side := e.startSidecars()
	defer side.stop(b)
	ctx := context.Background()
	ns := e.namespace("bench")
	e.storageClass("gp2", storagev1.VolumeBindingWaitForFirstConsumer, corev1.PersistentVolumeReclaimDelete, nil)
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		node := e.nodes[i%len(e.nodes)]
		name := fmt.Sprintf("c%d", i)
		start := time.Now()
		pvc, err := e.client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{annSelectedNode: node}},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("gp2"),
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "nginx"}},
				Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}}},
		}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		pvName := "pvc-" + string(pvc.UID)
		var handle string
		for handle == "" {
			if pv, err := e.client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{}); err == nil {
				handle = pv.Spec.CSI.VolumeHandle
			} else {
				time.Sleep(2 * time.Millisecond)
			}
		}
		vaName := volumeutil.AttachmentName(handle, driverName, node)
		for {
			va, err := e.client.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{})
			if err == nil && va.Status.Attached {
				break
			}
			if time.Since(start) > time.Minute {
				b.Fatalf("claim %s not attached after a minute", name)
			}
			time.Sleep(2 * time.Millisecond)
		}
		lat = append(lat, time.Since(start))
		b.StopTimer()
		e.deletePod(ns, name)
		if err := e.client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := e.client.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		b.StartTimer()
	}
	b.StopTimer()
	benchtest.ReportLatencies(b, "", lat)
}

// BenchmarkClaimToAttachedBareCSI is the reference: CreateVolume and
// ControllerPublishVolume on the driver's socket, nothing else.
func BenchmarkClaimToAttachedBareCSI(b *testing.B) {
	e := newEnv(b)
	ctrl := csi.NewControllerClient(e.dial())
	ctx := context.Background()
	var lat []time.Duration
	capability := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4"}}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		node := e.nodes[i%len(e.nodes)]
		zone := zones[i%len(zones)]
		start := time.Now()
		vol, err := ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: fmt.Sprintf("bare-%d", i),
			CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30}, VolumeCapabilities: []*csi.VolumeCapability{capability},
			Parameters:                map[string]string{"type": "gp2"},
			AccessibilityRequirements: &csi.TopologyRequirement{Preferred: []*csi.Topology{{Segments: map[string]string{"topology.ebs.csi.aws.com/zone": zone}}}}})
		if err != nil {
			b.Fatal(err)
		}
		id := vol.GetVolume().GetVolumeId()
		if _, err := ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: e.instances[node], VolumeCapability: capability}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		b.StopTimer()
		if _, err := ctrl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: e.instances[node]}); err != nil {
			b.Fatal(err)
		}
		if _, err := ctrl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	benchtest.ReportLatencies(b, "", lat)
}
