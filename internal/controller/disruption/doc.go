// Package disruption is the disruption controller of the controller-manager
// ("disruption-controller"): it keeps the status of every policy/v1
// PodDisruptionBudget, which the pods/eviction subresource of the API server reads to
// allow or refuse an eviction.
//
// Contract, as upstream:
//   - The budget's pods are those of its namespace its selector matches (an empty
//     selector matches them all). A pod is healthy when it is Ready, not being deleted
//     and not in status.disruptedPods for less than DeletionTimeout (2 minutes).
//   - An integer minAvailable expects the matching pods and desires minAvailable
//     healthy. maxUnavailable and a percentage minAvailable expect the sum of
//     spec.replicas of the pods' controllers — ReplicationControllers, Deployments
//     (through their ReplicaSets), ReplicaSets and StatefulSets, read from shared
//     informers — with percentages rounded up; pods without a controller are reported
//     in an UnmanagedPods Event. Controllers of any other kind (upstream reads their
//     scale subresource) make the sync fail.
//   - status.currentHealthy, desiredHealthy, expectedPods, observedGeneration and
//     disruptionsAllowed = max(currentHealthy-desiredHealthy, 0) (0 while no pod is
//     expected) are written through poddisruptionbudgets/status with the condition
//     DisruptionAllowed: True/SufficientPods or False/InsufficientPods.
//   - Entries of status.disruptedPods are dropped once their pod is gone or being
//     deleted, or DeletionTimeout after the eviction (Warning Event NotDeleted on the
//     pod); the budget is synced again when the next entry expires.
//   - When the status cannot be computed, disruptionsAllowed is set to 0 with the
//     condition False/SyncFailed and the error as message, so that evictions stop.
//   - A pod not being deleted whose DisruptionTarget condition (not set by the
//     kubelet) has been True for StalePodDisruptionTimeout (2 minutes) gets it set to
//     False through pods/status.
//   - Events NoPods, UnmanagedPods, CalculateExpectedPodCountFailed, NotDeleted and
//     MultiplePodDisruptionBudgets, from the source "controllermanager".
//
// Decisions are pure functions in budget.go; finders.go reads the controllers' scale.
package disruption
