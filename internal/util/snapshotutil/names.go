package snapshotutil

// The finalizer, annotation and Event reason names of snapshot.storage.k8s.io objects,
// as upstream's snapshot-controller and csi-snapshotter write them.
const (
	FinalizerSnapshotBound    = "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection"
	FinalizerSnapshotAsSource = "snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection"
	FinalizerContentBound     = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"
	FinalizerPVCAsSource      = "snapshot.storage.kubernetes.io/pvc-as-source-protection"
	AnnDefaultClass           = "snapshot.storage.kubernetes.io/is-default-class"

	ReasonCreatingSnapshot        = "CreatingSnapshot"
	ReasonSnapshotCreated         = "SnapshotCreated"
	ReasonSnapshotReady           = "SnapshotReady"
	ReasonSnapshotCreationFailed  = "SnapshotCreationFailed"
	ReasonSnapshotContentFailed   = "SnapshotContentCreationFailed"
	ReasonSnapshotDeletePending   = "SnapshotDeletePending"
	ReasonSnapshotFinalizerFailed = "SnapshotFinalizerError"
)
