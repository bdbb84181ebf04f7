package kubelet

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/util/volumeutil"
)

// countingMounter is a hollow mounter that counts the stage and publish calls.
type countingMounter struct {
	*hollowMounter
	stages, publishes int
}

func (m *countingMounter) Stage(ctx context.Context, v *Volume, staging string) error {
	m.stages++
	return m.hollowMounter.Stage(ctx, v, staging)
}

func (m *countingMounter) Publish(ctx context.Context, v *Volume, staging, target string) error {
	m.publishes++
	return m.hollowMounter.Publish(ctx, v, staging, target)
}

// A pod's CSI volume is staged and published once: later syncs of the running pod do
// not call NodeStageVolume or NodePublishVolume again.
func TestSetUpCSIPublishesOnce(t *testing.T) {
	const node, handle, driver = "node-1", "vol-0abc", "ebs.csi.aws.com"
	pod := testPod("db", node)
	pod.UID = "uid-db"
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	client := fake.NewClientset(
		&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-1"}, Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle}}}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: "data"},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pvc-1"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}},
		&storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: volumeutil.AttachmentName(handle, driver, node)},
			Spec:   storagev1.VolumeAttachmentSpec{Attacher: driver, NodeName: node, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pvc-1")}},
			Status: storagev1.VolumeAttachmentStatus{Attached: true}},
	)
	mounter := &countingMounter{hollowMounter: newHollowMounter(nil)}
	drivers := storagelisters.NewCSIDriverLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
	m := newVolumeManager(node, t.TempDir(), client, drivers, mounter)
	m.reported.Insert(volumeutil.UniqueVolumeName(driver, handle))

	for i := range 3 {
		if err := m.setUpCSI(context.Background(), pod, "default/db"); err != nil {
			t.Fatalf("sync %d: %v", i+1, err)
		}
	}
	if mounter.stages != 1 || mounter.publishes != 1 {
		t.Errorf("after 3 syncs: %d stages and %d publishes, want 1 and 1", mounter.stages, mounter.publishes)
	}
	if len(mounter.Mounts()) != 1 {
		t.Errorf("mounts %v, want the one target", mounter.Mounts())
	}
}
