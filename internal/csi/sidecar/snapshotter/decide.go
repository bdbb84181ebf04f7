package snapshotter

import (
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/util/snapshotutil"
)

// contentStep is what the sidecar does with a content.
type contentStep int

const (
	contentNothing contentStep = iota
	// contentCreate calls CreateSnapshot (again, until ready).
	contentCreate
	// contentDelete calls DeleteSnapshot, then drops the finalizer.
	contentDelete
	// contentRelease drops the finalizer without deleting the snapshot (Retain).
	contentRelease
)

// decideContent decides for a content of driver.
func decideContent(c *snapv1.VolumeSnapshotContent, driver string) contentStep {
	if c.Spec.Driver != driver {
		return contentNothing
	}
	if c.DeletionTimestamp != nil {
		if !slices.Contains(c.Finalizers, snapshotutil.FinalizerContentBound) {
			return contentNothing
		}
		if c.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentDelete && snapshotHandle(c) != "" {
			return contentDelete
		}
		return contentRelease
	}
	if c.Spec.Source.VolumeHandle == nil {
		return contentNothing // pre-provisioned: the handle is given
	}
	if c.Status != nil && c.Status.ReadyToUse != nil && *c.Status.ReadyToUse {
		return contentNothing
	}
	return contentCreate
}

func snapshotHandle(c *snapv1.VolumeSnapshotContent) string {
	if c.Status != nil && c.Status.SnapshotHandle != nil {
		return *c.Status.SnapshotHandle
	}
	return ptr.Deref(c.Spec.Source.SnapshotHandle, "")
}

// createParams are the class's parameters the driver sees.
func createParams(params map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range params {
		if !strings.HasPrefix(strings.ToLower(k), "csi.storage.k8s.io/") {
			out[k] = v
		}
	}
	return out
}

// contentStatus is the content's status after CreateSnapshot answered s.
func contentStatus(s *csi.Snapshot) *snapv1.VolumeSnapshotContentStatus {
	st := &snapv1.VolumeSnapshotContentStatus{
		SnapshotHandle: ptr.To(s.GetSnapshotId()),
		ReadyToUse:     ptr.To(s.GetReadyToUse()),
		RestoreSize:    ptr.To(s.GetSizeBytes()),
	}
	if ts := s.GetCreationTime(); ts != nil {
		st.CreationTime = ptr.To(ts.AsTime().UnixNano())
	}
	return st
}
