// Package daemonset is the DaemonSet controller of the controller-manager
// ("daemonset-controller"): one pod per eligible node.
//
// Contract:
//   - A node is eligible when the pod template's nodeSelector and required node affinity
//     match it and its NoSchedule/NoExecute taints are tolerated by the template's
//     tolerations plus the ones every DaemonSet pod gets, as upstream
//     (node.kubernetes.io/not-ready and unreachable NoExecute; disk-pressure,
//     memory-pressure, pid-pressure and unschedulable NoSchedule; network-unavailable
//     NoSchedule for hostNetwork pods).
//   - Pods are created unscheduled (generateName "<ds>-", controller ownerReference,
//     labels controller-revision-hash and pod-template-generation) with a required node
//     affinity on matchFields metadata.name=<node>, and are bound by the scheduler.
//   - Extra pods on a node, pods on nodes that are no longer eligible or gone, and
//     failed pods are deleted (failed ones come back).
//   - RollingUpdate replaces pods of an old template, at most maxUnavailable (default 1)
//     nodes unavailable at a time; OnDelete leaves them.
//   - status desired/current/misscheduled/ready/updated/available/unavailable and
//     observedGeneration; Events SuccessfulCreate/SuccessfulDelete/FailedCreate.
//
// Decisions (nodes.go) are pure and tested with tables. Expectations (package expectations)
// keep it from creating twice for a node while its cache lags. It talks to the API
// server only through client-go (informers on DaemonSets, Pods and Nodes).
package daemonset
