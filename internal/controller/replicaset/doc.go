// Package replicaset is the ReplicaSet controller of the controller-manager
// ("replicaset-controller"): it keeps, for every ReplicaSet, spec.replicas active pods
// that match its selector, comparing desired with actual pods and creating or deleting
// pods to match.
//
// Contract:
//   - Pods it creates come from spec.template, are named generateName "<rs>-", and carry an
//     ownerReference to the ReplicaSet with controller=true and blockOwnerDeletion=true.
//   - Pods matching the selector without a controller are adopted (ownerReference added);
//     owned pods that stop matching are released (ownerReference removed).
//   - Expectations (package expectations) record the creations and deletions in flight, so a
//     ReplicaSet is not acted on again until the informer has seen them: it never
//     over-creates, even with a stale cache.
//   - Scale-down deletes the least valuable pods first (rank.go: unscheduled, pending,
//     not ready, doubled-up on a node, ready for less time, restarted more, newest).
//   - status.replicas/fullyLabeledReplicas/readyReplicas/availableReplicas/
//     observedGeneration and the ReplicaFailure condition are written through /status.
//   - Events SuccessfulCreate, SuccessfulDelete, FailedCreate, FailedDelete as upstream.
//
// It talks to the API server only through client-go (shared informers on ReplicaSets and
// Pods, pod create/delete/patch, replicasets/status).
//
// NewFor runs the same logic on another Workload whose objects it reads and writes as
// ReplicaSets: package replication runs it on ReplicationControllers, whose pods carry
// their own kind in the ownerReference and whose Events have their own source.
package replicaset
