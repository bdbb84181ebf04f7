// Package replication is the ReplicationController controller of the
// controller-manager ("replication-controller"): it keeps, for every core/v1
// ReplicationController, spec.replicas active pods that match its selector.
//
// It is the ReplicaSet controller (package replicaset) run on ReplicationControllers:
// this package only presents them as ReplicaSets (convert.go) — the selector map
// becomes matchLabels, the template and status carry over field by field — and back
// for the status write. Everything else is the ReplicaSet controller's contract:
//   - pods are created from spec.template with generateName "<rc>-" and a controller
//     ownerReference apiVersion v1, kind ReplicationController;
//   - orphans are adopted, non-matching pods released, scale-down picks the least
//     valuable pods, expectations prevent over-creation;
//   - status.replicas/fullyLabeledReplicas/readyReplicas/availableReplicas/
//     observedGeneration and the ReplicaFailure condition are written through
//     replicationcontrollers/status;
//   - Events SuccessfulCreate, SuccessfulDelete, FailedCreate, FailedDelete from the
//     component "replication-controller", as upstream.
package replication
