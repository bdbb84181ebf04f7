// Package attacher is kubelab's external-attacher: the CSI sidecar that carries out
// the VolumeAttachments of its driver with ControllerPublishVolume and
// ControllerUnpublishVolume.
//
// It is the attach step of the storage flow: a VolumeAttachment, once created, is
// carried out with ControllerPublishVolume and then reports .status.attached: true.
// For a VolumeAttachment whose spec.attacher is this
// driver: it puts the finalizer external-attacher/<driver with dots as dashes> on the
// PV and then on the VolumeAttachment (with the node's CSI id in the annotation
// csi.alpha.kubernetes.io/node-id), finds that id in the node's CSINode entry for
// the driver (a detach falls back to that annotation; Nodes are not read), calls
// ControllerPublishVolume with the PV's volume handle, capability, read-only flag
// and attributes, and writes status.attached=true with the publish context as
// status.attachmentMetadata (devicePath reaches NodeStageVolume that way); a
// failure goes to status.attachError and is retried with backoff. A deleted
// VolumeAttachment is detached with ControllerUnpublishVolume (failures in
// status.detachError), marked attached=false and its finalizer removed; the PV's
// finalizer goes once the PV is being deleted and no VolumeAttachment names it.
// A driver without PUBLISH_UNPUBLISH_VOLUME is attached trivially (status only).
// Every write is a patch (strategic merge, with the read resourceVersion as its
// precondition): the driver's attacher role allows get, list, watch and patch of
// PersistentVolumes and VolumeAttachments, patch of their status, and reading
// CSINodes, nothing else (not even Events).
//
// Contract: New(cfg, client, factory, conn) registers informers on the shared
// factory; Run probes the driver and works until ctx ends; decideAttachment,
// decideVolume and publishRequest are pure and tested with tables.
package attacher
