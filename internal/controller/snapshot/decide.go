package snapshot

import (
	"fmt"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/util/snapshotutil"
)

func has(list []string, f string) bool {
	for _, x := range list {
		if x == f {
			return true
		}
	}
	return false
}

func without(list []string, fs ...string) []string {
	out := make([]string, 0, len(list))
	for _, x := range list {
		keep := true
		for _, f := range fs {
			if x == f {
				keep = false
			}
		}
		if keep {
			out = append(out, x)
		}
	}
	return out
}

// contentName is the VolumeSnapshotContent of a dynamic snapshot.
func contentName(vs *snapv1.VolumeSnapshot) string { return "snapcontent-" + string(vs.UID) }

// pickClass is the snapshot's class: the one it names, else the one default class
// of driver. It fails when the named class is missing, or there is no single default.
func pickClass(vs *snapv1.VolumeSnapshot, classes []*snapv1.VolumeSnapshotClass, driver string) (*snapv1.VolumeSnapshotClass, error) {
	if name := ptr.Deref(vs.Spec.VolumeSnapshotClassName, ""); name != "" {
		for _, c := range classes {
			if c.Name == name {
				return c, nil
			}
		}
		return nil, fmt.Errorf("volumesnapshotclass %q not found", name)
	}
	var defaults []*snapv1.VolumeSnapshotClass
	for _, c := range classes {
		if c.Driver == driver && c.Annotations[snapshotutil.AnnDefaultClass] == "true" {
			defaults = append(defaults, c)
		}
	}
	switch len(defaults) {
	case 0:
		return nil, fmt.Errorf("cannot find default snapshot class for driver %s", driver)
	case 1:
		return defaults[0], nil
	}
	return nil, fmt.Errorf("%d default snapshot classes were found for driver %s", len(defaults), driver)
}

// newContent is the content of a dynamic snapshot of the PV.
func newContent(vs *snapv1.VolumeSnapshot, class *snapv1.VolumeSnapshotClass, pv *corev1.PersistentVolume) *snapv1.VolumeSnapshotContent {
	return &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: contentName(vs), Finalizers: []string{snapshotutil.FinalizerContentBound}},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef: corev1.ObjectReference{Kind: "VolumeSnapshot", APIVersion: "snapshot.storage.k8s.io/v1",
				Namespace: vs.Namespace, Name: vs.Name, UID: vs.UID},
			DeletionPolicy:          class.DeletionPolicy,
			Driver:                  class.Driver,
			VolumeSnapshotClassName: ptr.To(class.Name),
			Source:                  snapv1.VolumeSnapshotContentSource{VolumeHandle: ptr.To(pv.Spec.CSI.VolumeHandle)},
			SourceVolumeMode:        pv.Spec.VolumeMode,
		},
	}
}

// snapshotStatus is the snapshot's status copied from its bound content.
func snapshotStatus(content *snapv1.VolumeSnapshotContent) *snapv1.VolumeSnapshotStatus {
	st := &snapv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: ptr.To(content.Name), ReadyToUse: ptr.To(false)}
	cs := content.Status
	if cs == nil {
		return st
	}
	if cs.CreationTime != nil {
		t := metav1.NewTime(time.Unix(0, *cs.CreationTime))
		st.CreationTime = &t
	}
	if cs.ReadyToUse != nil {
		st.ReadyToUse = ptr.To(*cs.ReadyToUse)
	}
	if cs.RestoreSize != nil {
		st.RestoreSize = resource.NewQuantity(*cs.RestoreSize, resource.BinarySI)
	}
	st.Error = cs.Error
	return st
}

// sameStatus compares the fields the controller writes.
func sameStatus(a, b *snapv1.VolumeSnapshotStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	eqTime := (a.CreationTime == nil) == (b.CreationTime == nil) && (a.CreationTime == nil || a.CreationTime.Equal(b.CreationTime))
	eqSize := (a.RestoreSize == nil) == (b.RestoreSize == nil) && (a.RestoreSize == nil || a.RestoreSize.Cmp(*b.RestoreSize) == 0)
	eqErr := (a.Error == nil) == (b.Error == nil) && (a.Error == nil || ptr.Deref(a.Error.Message, "") == ptr.Deref(b.Error.Message, ""))
	return ptr.Deref(a.BoundVolumeSnapshotContentName, "") == ptr.Deref(b.BoundVolumeSnapshotContentName, "") &&
		ptr.Deref(a.ReadyToUse, false) == ptr.Deref(b.ReadyToUse, false) && eqTime && eqSize && eqErr
}
