// Package snapshotter is kubelab's volume snapshotting: the snapshot controller
// (VolumeSnapshot ↔ VolumeSnapshotContent, NewSnapshotController) and the CSI
// snapshotter sidecar (VolumeSnapshotContent → CreateSnapshot/DeleteSnapshot, New),
// as upstream's snapshot-controller and csi-snapshotter split the work.
//
// It watches VolumeSnapshots and has the driver take them with CreateSnapshot. The
// snapshot controller takes a VolumeSnapshot of a bound claim
// (spec.source.persistentVolumeClaimName), picks its VolumeSnapshotClass (named, or
// the driver's default: snapshot.storage.kubernetes.io/is-default-class=true),
// creates the VolumeSnapshotContent snapcontent-<snapshot uid> (spec.driver,
// source.volumeHandle, volumeSnapshotRef, deletionPolicy of the class) and copies
// the content's status to the snapshot (boundVolumeSnapshotContentName,
// readyToUse, restoreSize, creationTime, error), with the events CreatingSnapshot,
// SnapshotCreated and SnapshotReady. A pre-provisioned snapshot
// (spec.source.volumeSnapshotContentName) binds to its content. Finalizers, all
// under snapshot.storage.kubernetes.io/: volumesnapshot-bound-protection and
// volumesnapshot-as-source-protection on the snapshot, pvc-as-source-protection on
// the claim while the snapshot is being taken, and
// volumesnapshotcontent-bound-protection on the content. Deleting a snapshot deletes
// its content under deletionPolicy Delete (and releases it under Retain).
//
// The sidecar calls CreateSnapshot (name snapshot-<snapshot uid>, the class's
// parameters without the csi.storage.k8s.io/ keys) for contents of its driver
// until the driver reports readyToUse, writing snapshotHandle, creationTime,
// restoreSize and readyToUse to the content's status (errors to status.error, then
// retried); for a content being deleted under Delete it calls DeleteSnapshot, then
// removes the content's finalizer.
//
// Contract: client-go and the snapshot clientset only; constructors register
// informers on the factories given (started by the caller); decisions are pure
// functions tested with tables.
package snapshotter
