// Package pvbinder is the PersistentVolume controller of the controller-manager
// ("persistentvolume-controller"): it binds PersistentVolumeClaims to
// PersistentVolumes, hands claims of a dynamic StorageClass to their external
// provisioner, and moves volumes through their phases when claims go away.
//
// It is the PV-controller step of the storage flow: the PVC stays Pending while its
// WaitForFirstConsumer class waits for a pod (event WaitForFirstConsumer); once the
// scheduler has set volume.kubernetes.io/selected-node (or at once for Immediate
// classes) the claim is annotated volume.kubernetes.io/storage-provisioner (and the
// beta key) with the class's provisioner (event ExternalProvisioning); when a PV
// appears, pre-bound by the provisioner or matching statically, the controller binds
// the pair: the PV's spec.claimRef and the claim's spec.volumeName, the annotations
// pv.kubernetes.io/bind-completed and pv.kubernetes.io/bound-by-controller, and the
// phases PV Available → Bound, PVC Pending → Bound (status.capacity and accessModes
// from the PV). When the claim is deleted the PV becomes Released; under reclaim
// policy Delete a dynamically provisioned PV is then deleted by its provisioner
// (pv.kubernetes.io/provisioned-by), Retain keeps it Released, anything else fails
// (phase Failed with an event). A bound claim whose PV vanished turns Lost.
//
// Contract: client-go only (PVC, PV and StorageClass informers on the shared factory
// given to New); handlers enqueue keys; syncClaim and syncVolume are idempotent and
// compare desired with actual; the decisions (decideClaim, decideVolume, reclaim) are
// pure functions tested with tables; status goes through the status subresource.
// Static binding of WaitForFirstConsumer claims is left to the scheduler, which sets
// the PV's claimRef; the controller then completes the binding, as upstream.
package pvbinder
