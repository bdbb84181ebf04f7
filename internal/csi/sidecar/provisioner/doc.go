// Package provisioner is kubelab's external-provisioner: the CSI sidecar that turns
// a PersistentVolumeClaim into a volume of its driver (CreateVolume) and a
// PersistentVolume, and deletes both when a Delete-policy volume is Released.
//
// It is the provisioning step of the storage flow: it watches claims and calls
// CreateVolume. A claim is provisioned
// when the PV controller has annotated it volume.kubernetes.io/storage-provisioner
// (or the beta key) with this driver's name, it has no volume yet, its class is
// this driver's, and, under WaitForFirstConsumer, the scheduler has set
// volume.kubernetes.io/selected-node. CreateVolume gets the name pvc-<claim uid>
// (idempotent: a retry or a restarted provisioner gets the same volume), the
// claim's size and access modes as capabilities, the class's parameters (keys under
// csi.storage.k8s.io/ are the provisioner's own: fstype is taken out, and the
// pvc/name, pvc/namespace and pv/name keys are added with ExtraCreateMetadata), the
// clone or snapshot source of the claim's dataSource, and accessibility
// requirements built from the selected node's CSINode topology keys and labels
// (preferred first; requisite all such segments, or the class's allowedTopologies).
// The PV it creates is pre-bound to the claim (claimRef with UID), annotated
// pv.kubernetes.io/provisioned-by: <driver>, carries the finalizer
// external-provisioner.volume.kubernetes.io/finalizer under reclaim policy Delete,
// and takes its node affinity from the volume's accessible topology. Events on the
// claim: Provisioning, ProvisioningSucceeded, ProvisioningFailed. When CreateVolume
// answers ResourceExhausted for a selected node, or the node is gone, the
// selected-node annotation is removed so that the scheduler chooses again.
//
// Deletion: a PV of this driver that is Released under reclaim policy Delete (or
// being deleted while not Bound) and has no VolumeAttachment is deleted with
// DeleteVolume, then the PV object is deleted and the finalizer removed
// (VolumeFailedDelete on failure). Under Retain only the finalizer is removed.
//
// Contract: New(cfg, client, factory, conn, snapshots) registers informers on the
// shared factory; Run probes the driver over its socket, then works until ctx ends.
// The pure parts (shouldProvision, createRequest, accessibilityRequirements,
// buildPV, decideDelete) are tested with tables. It needs no more than the driver's
// provisioner role: PersistentVolumes get, list, watch, create, patch (the finalizer's
// removal) and delete; claims get, list, watch and update (the selected node's removal);
// StorageClasses, Nodes, CSINodes and VolumeAttachments read; snapshots get; Events.
package provisioner
