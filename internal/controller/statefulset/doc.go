// Package statefulset is the StatefulSet controller of the controller-manager
// ("statefulset-controller"): pods with stable names and stable storage.
//
// Contract:
//   - Pod i is named "<set>-<i>" (ordinals from spec.ordinals.start), labelled
//     statefulset.kubernetes.io/pod-name, apps.kubernetes.io/pod-index and
//     controller-revision-hash, with spec.hostname=<pod> and spec.subdomain=serviceName,
//     and owned by the set (controller=true, blockOwnerDeletion=true).
//   - Each volumeClaimTemplate gives pod i a PVC "<template>-<set>-<i>", created before
//     the pod and never replaced; the pod's volume of the template's name points at it.
//     With persistentVolumeClaimRetentionPolicy.whenDeleted=Delete the PVC is owned by
//     the set (the garbage collector removes it with the set); with Retain it stays.
//   - OrderedReady (the default): pod i+1 is created only once pods 0..i are Running and
//     Ready; scale-down removes the highest ordinal first, one at a time, only while the
//     others are Running and Ready. Parallel: all at once.
//   - Templates are kept in ControllerRevisions "<set>-<hash>" (the name pods carry in
//     controller-revision-hash), numbered; a template set back to an earlier one reuses
//     its revision, renumbered (a rollback); old ones beyond revisionHistoryLimit that no
//     pod runs are deleted. status.updateRevision holds the template, currentRevision the
//     one the pods ran before; it becomes the update revision once every replica runs
//     that and is ready.
//   - RollingUpdate: pods not at the update revision are deleted highest ordinal first,
//     down to startOrdinal+spec.updateStrategy.rollingUpdate.partition, one at a time
//     once the rest are Running and Ready, and come back at the update revision; pods
//     below the partition are created (again) at the current revision's template. OnDelete:
//     only deleted pods get the update revision.
//   - A pod that failed or succeeded is deleted and created again.
//   - status replicas/readyReplicas/availableReplicas/currentReplicas/updatedReplicas/
//     currentRevision/updateRevision/observedGeneration; Events SuccessfulCreate and
//     SuccessfulDelete as upstream.
//
// Decisions (plan.go) are pure and tested with tables. It talks to the API server only
// through client-go (informers on StatefulSets, Pods, PVCs and ControllerRevisions).
package statefulset
