// Package protection holds the storage-object-in-use protection controllers of the
// controller-manager: "pvc-protection-controller" and "pv-protection-controller".
//
// They keep claims and volumes in use from going away, with finalizers. Every claim gets
// the finalizer kubernetes.io/pvc-protection and every volume
// kubernetes.io/pv-protection: the API server's StorageObjectInUseProtection admission
// adds them at creation, and the controllers add them to objects that lack them (ones
// created before, or with the finalizer removed while in use). A deleted claim
// keeps its finalizer while a scheduled pod (spec.nodeName set) names it, directly
// or as a generic ephemeral volume, unless that pod was force-deleted or is done
// with it (deletionTimestamp with a zero grace period); the controller looks in its
// cache and then lists the namespace's pods live before it lets the claim go. A
// deleted volume keeps its finalizer while it is Bound.
//
// Contract: client-go only; New(cfg, client, factory) registers informers on the
// shared factory; syncClaim and syncVolume are idempotent; the decisions
// (claimStep, podUsesClaim, volumeStep) are pure and tested with tables.
package protection
