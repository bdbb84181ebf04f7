// Package snapshot is the controller-manager's snapshot controller
// ("snapshot-controller", as upstream's external-snapshotter runs it beside
// kube-controller-manager): the step of the flow that turns a VolumeSnapshot into a
// VolumeSnapshotContent for the CSI snapshotter sidecar (internal/csi/sidecar/snapshotter)
// to take with CreateSnapshot, and copies the result back.
//
// It takes a VolumeSnapshot of a bound claim (spec.source.persistentVolumeClaimName),
// picks its VolumeSnapshotClass (named, or the driver's default:
// snapshot.storage.kubernetes.io/is-default-class=true), creates the
// VolumeSnapshotContent snapcontent-<snapshot uid> (spec.driver, source.volumeHandle,
// volumeSnapshotRef, deletionPolicy of the class) and copies the content's status to the
// snapshot (boundVolumeSnapshotContentName, readyToUse, restoreSize, creationTime, error),
// with the events CreatingSnapshot, SnapshotCreated and SnapshotReady. A pre-provisioned
// snapshot (spec.source.volumeSnapshotContentName) binds to its content. Finalizers, all
// under snapshot.storage.kubernetes.io/: volumesnapshot-bound-protection and
// volumesnapshot-as-source-protection on the snapshot, pvc-as-source-protection on the
// claim while the snapshot is being taken, and volumesnapshotcontent-bound-protection on
// the content (the sidecar removes it). Deleting a snapshot deletes its content under
// deletionPolicy Delete (and releases it under Retain). The names it shares with the
// sidecar are in internal/util/snapshotutil.
//
// Contract: client-go and the snapshot clientset only; New registers informers on the
// factories given (started by the caller); decisions (pickClass, newContent,
// snapshotStatus, sameStatus) are pure functions tested with tables.
package snapshot
