package flowtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/controller/attachdetach"
	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/util/volumeutil"
)

func (e *env) eventMessage(ns, name, reason string) string {
	for _, ev := range e.events(ns, name) {
		if ev.Reason == reason {
			return ev.Message
		}
	}
	return ""
}

// TestMultiAttachAndAttachError: a ReadWriteOnce volume attached to node-b is not
// attached to node-c for a second pod (Multi-Attach error); once node-b lets it go,
// the attachment to node-c is tried, and the cloud's zone refusal reaches the pod
// as FailedAttachVolume.
func TestMultiAttachAndAttachError(t *testing.T) {
	e := newEnv(t)
	ctrl := e.startControllers()
	defer ctrl.stop(t)
	side := e.startSidecars()
	defer side.stop(t)
	ctx := context.Background()
	ns := e.namespace("multi")
	e.storageClass("gp2", storagev1.VolumeBindingWaitForFirstConsumer, corev1.PersistentVolumeReclaimDelete, nil)
	pvc := e.claim(ns, "data", "gp2", "1Gi")
	e.pod(ns, "first", "data")
	e.selectNode(ns, "data", "node-b")
	testutil.EventuallyWithin(t, flowTimeout, "claim Bound", func() (bool, error) { return e.getClaim(ns, "data").Status.Phase == corev1.ClaimBound, nil })
	pv, err := e.client.CoreV1().PersistentVolumes().Get(ctx, "pvc-"+string(pvc.UID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.bindPod(ns, "first", "node-b")
	vaB := volumeutil.AttachmentName(pv.Spec.CSI.VolumeHandle, driverName, "node-b")
	testutil.EventuallyWithin(t, flowTimeout, "attached to node-b", func() (bool, error) {
		va, err := e.client.StorageV1().VolumeAttachments().Get(ctx, vaB, metav1.GetOptions{})
		return err == nil && va.Status.Attached, nil
	})
	unique := volumeutil.UniqueVolumeName(driverName, pv.Spec.CSI.VolumeHandle)
	e.setVolumesInUse("node-b", unique)

	e.pod(ns, "second", "data")
	e.bindPod(ns, "second", "node-c")
	testutil.EventuallyWithin(t, flowTimeout, "Multi-Attach error", func() (bool, error) {
		return strings.Contains(e.eventMessage(ns, "second", attachdetach.ReasonFailedAttach), "Multi-Attach error for volume"), nil
	})
	vaC := volumeutil.AttachmentName(pv.Spec.CSI.VolumeHandle, driverName, "node-c")
	// The Multi-Attach error says the controller chose not to attach; it keeps to that.
	testutil.Consistently(t, 500*time.Millisecond, "no attachment to node-c while node-b holds the volume", func() error {
		if _, err := e.client.StorageV1().VolumeAttachments().Get(ctx, vaC, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("VolumeAttachment %s: %v", vaC, err)
		}
		return nil
	})

	// node-b lets go; node-c is tried and the cloud refuses the other zone.
	e.deletePod(ns, "first")
	e.setVolumesInUse("node-b")
	var va *storagev1.VolumeAttachment
	testutil.EventuallyWithin(t, flowTimeout, "attach error on node-c", func() (bool, error) {
		va, err = e.client.StorageV1().VolumeAttachments().Get(ctx, vaC, metav1.GetOptions{})
		return err == nil && va.Status.AttachError != nil, nil
	})
	if va.Status.Attached {
		t.Fatal("attached across zones")
	}
	testutil.EventuallyWithin(t, flowTimeout, "FailedAttachVolume with the attach error", func() (bool, error) {
		for _, ev := range e.events(ns, "second") {
			if ev.Reason == attachdetach.ReasonFailedAttach && strings.HasPrefix(ev.Message, "AttachVolume.Attach failed for volume") {
				return true, nil
			}
		}
		return false, nil
	})
	t.Logf("attach error: %s", va.Status.AttachError.Message)
}
