package apiserver

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
)

// snapshotResources are the rows of snapshot.storage.k8s.io/v1: VolumeSnapshots, their
// contents and classes, which the snapshot controller and the CSI snapshotter act on.
func snapshotResources() []resource {
	snap := func(r resource) resource {
		r.group, r.version, r.status, r.generation = snapshotGroup, "v1", true, true
		return r
	}
	return []resource{
		snap(resource{kind: "VolumeSnapshot", plural: "volumesnapshots", singular: "volumesnapshot", shortNames: []string{"vs"}, namespaced: true,
			newObj: func() runtime.Object { return &snapshotv1.VolumeSnapshot{} }, newList: func() runtime.Object { return &snapshotv1.VolumeSnapshotList{} },
			columns: []metav1.TableColumnDefinition{nameCol(), col("ReadyToUse", "boolean", "Whether the snapshot is ready to be used to restore a volume."),
				col("SourcePVC", "string", "The claim the snapshot was taken from."),
				col("SourceSnapshotContent", "string", "The content a pre-provisioned snapshot names."),
				col("RestoreSize", "string", "The minimum size of a volume restored from it."),
				col("SnapshotClass", "string", "The VolumeSnapshotClass it asks for."),
				col("SnapshotContent", "string", "The VolumeSnapshotContent it is bound to."),
				col("CreationTime", "string", "When the storage system took the snapshot."), ageCol()},
			row: func(o runtime.Object) []interface{} {
				s := o.(*snapshotv1.VolumeSnapshot)
				ready, restore, content, created := "", "", "", ""
				if st := s.Status; st != nil {
					if st.ReadyToUse != nil {
						ready = fmt.Sprint(*st.ReadyToUse)
					}
					if st.RestoreSize != nil {
						restore = st.RestoreSize.String()
					}
					if st.BoundVolumeSnapshotContentName != nil {
						content = *st.BoundVolumeSnapshotContentName
					}
					if st.CreationTime != nil {
						created = age(*st.CreationTime)
					}
				}
				return []interface{}{s.Name, ready, strOr(s.Spec.Source.PersistentVolumeClaimName), strOr(s.Spec.Source.VolumeSnapshotContentName),
					restore, strOr(s.Spec.VolumeSnapshotClassName), content, created, age(s.CreationTimestamp)}
			}}),
		snap(resource{kind: "VolumeSnapshotContent", plural: "volumesnapshotcontents", singular: "volumesnapshotcontent", shortNames: []string{"vsc", "vscs"},
			newObj: func() runtime.Object { return &snapshotv1.VolumeSnapshotContent{} }, newList: func() runtime.Object { return &snapshotv1.VolumeSnapshotContentList{} },
			columns: []metav1.TableColumnDefinition{nameCol(), col("ReadyToUse", "boolean", "Whether the snapshot is ready to be used to restore a volume."),
				col("RestoreSize", "integer", "The size in bytes of a volume restored from it."),
				col("DeletionPolicy", "string", "What happens to the storage snapshot when this object goes."),
				col("Driver", "string", "The CSI driver that took it."),
				col("VolumeSnapshotClass", "string", "The class it was taken with."),
				col("VolumeSnapshot", "string", "The VolumeSnapshot it is bound to."),
				col("VolumeSnapshotNamespace", "string", "The namespace of that VolumeSnapshot."), ageCol()},
			row: func(o runtime.Object) []interface{} {
				c := o.(*snapshotv1.VolumeSnapshotContent)
				ready, restore := "", ""
				if st := c.Status; st != nil {
					if st.ReadyToUse != nil {
						ready = fmt.Sprint(*st.ReadyToUse)
					}
					if st.RestoreSize != nil {
						restore = fmt.Sprint(*st.RestoreSize)
					}
				}
				return []interface{}{c.Name, ready, restore, string(c.Spec.DeletionPolicy), c.Spec.Driver,
					strOr(c.Spec.VolumeSnapshotClassName), c.Spec.VolumeSnapshotRef.Name, c.Spec.VolumeSnapshotRef.Namespace, age(c.CreationTimestamp)}
			}}),
		{
			group: snapshotGroup, version: "v1", kind: "VolumeSnapshotClass", plural: "volumesnapshotclasses", singular: "volumesnapshotclass", shortNames: []string{"vsclass", "vsclasses"},
			newObj: func() runtime.Object { return &snapshotv1.VolumeSnapshotClass{} }, newList: func() runtime.Object { return &snapshotv1.VolumeSnapshotClassList{} },
			columns: []metav1.TableColumnDefinition{nameCol(), col("Driver", "string", "The CSI driver"), col("DeletionPolicy", "string", "What happens to snapshots of this class"), ageCol()},
			row: func(o runtime.Object) []interface{} {
				c := o.(*snapshotv1.VolumeSnapshotClass)
				return []interface{}{c.Name, c.Driver, string(c.DeletionPolicy), age(c.CreationTimestamp)}
			},
		},
	}
}

func strOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
