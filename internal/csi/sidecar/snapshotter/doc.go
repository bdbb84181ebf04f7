// Package snapshotter is the CSI snapshotter sidecar (upstream's csi-snapshotter): the
// step of the flow that takes the VolumeSnapshotContents the snapshot controller
// (internal/controller/snapshot) creates and has the driver take them with
// CreateSnapshot and DeleteSnapshot.
//
// It calls CreateSnapshot (name snapshot-<snapshot uid>, the class's parameters without
// the csi.storage.k8s.io/ keys) for contents of its driver until the driver reports
// readyToUse, writing snapshotHandle, creationTime, restoreSize and readyToUse to the
// content's status (errors to status.error, then retried); for a content being deleted
// under Delete it calls DeleteSnapshot, then removes the content's finalizer
// (snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection; the names it
// shares with the snapshot controller are in internal/util/snapshotutil).
//
// Contract: client-go and the snapshot clientset only; New registers informers on the
// factory given (started by the caller); decisions are pure functions tested with
// tables.
package snapshotter
