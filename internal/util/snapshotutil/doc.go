// Package snapshotutil holds what the snapshot controller (internal/controller/snapshot,
// run by the controller-manager) and the CSI snapshotter sidecar
// (internal/csi/sidecar/snapshotter) agree on about snapshot.storage.k8s.io objects: the
// finalizer, annotation and Event reason names, and the scheme their Events are
// recorded with. It serves the snapshot step of the flow (VolumeSnapshot →
// VolumeSnapshotContent → CreateSnapshot).
//
// It is a leaf: it imports no kubelab component, so both components may import it
// without importing each other.
package snapshotutil
