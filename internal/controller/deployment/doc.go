// Package deployment is the Deployment controller of the controller-manager
// ("deployment-controller"): it computes each Deployment's desired ReplicaSets and their
// replica counts.
//
// Contract:
//   - Each Deployment owns ReplicaSets named "<deployment>-<pod-template-hash>", where the
//     hash is of the pod template (and status.collisionCount); the hash is also the
//     pod-template-hash label of the ReplicaSet, its selector and its template.
//   - The ReplicaSet whose template equals the Deployment's (ignoring that label) is the
//     new one; the others are old. Re-applying an old template (kubectl rollout undo)
//     makes its ReplicaSet new again with the next revision.
//   - RollingUpdate scales the new ReplicaSet up and the old ones down within maxSurge and
//     maxUnavailable (rollout.go, pure and tested with tables); Recreate scales the old
//     ones to zero, waits for their pods to be gone, then scales the new one up.
//   - Replica changes while several ReplicaSets are active are spread proportionally.
//   - Annotations deployment.kubernetes.io/revision (ReplicaSet and Deployment),
//     revision-history, desired-replicas and max-replicas as upstream; old ReplicaSets
//     beyond spec.revisionHistoryLimit are deleted once they are empty.
//   - status replicas/updatedReplicas/readyReplicas/availableReplicas/
//     unavailableReplicas/observedGeneration/collisionCount and the conditions Available
//     (MinimumReplicasAvailable/MinimumReplicasUnavailable) and Progressing
//     (NewReplicaSetCreated, FoundNewReplicaSet, ReplicaSetUpdated, NewReplicaSetAvailable,
//     ProgressDeadlineExceeded, DeploymentPaused, DeploymentResumed), so that
//     `kubectl rollout status` works; Events ScalingReplicaSet.
//
// It talks to the API server only through client-go (informers on Deployments,
// ReplicaSets and Pods; ReplicaSet create/update/delete; deployments and
// deployments/status updates).
package deployment
