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
//   - Its history is kept in ControllerRevisions, as upstream: the current one holds a
//     patch that puts the template back ({"spec":{"template":{…,"$patch":"replace"}}}),
//     is named "<ds>-<hash>", labelled with the template's labels and
//     controller-revision-hash=<hash>, carries the DaemonSet's annotations (so kubectl
//     rollout history shows change-cause) and is controlled by the DaemonSet. A template
//     no revision holds gets a new one numbered above the rest; going back to an old
//     template (kubectl rollout undo patches it back from its revision) renumbers that
//     revision instead. A name taken by another template raises status.collisionCount.
//     Old revisions beyond spec.revisionHistoryLimit (10) that no pod runs are deleted.
//   - Pods are created unscheduled (generateName "<ds>-", controller ownerReference,
//     labels controller-revision-hash=<the current revision's hash> and
//     pod-template-generation=<the template generation the API server keeps in the
//     deprecated.daemonset.template.generation annotation>) with a required node
//     affinity on matchFields metadata.name=<node>, and are bound by the scheduler. A pod
//     is up to date when either label matches.
//   - Extra pods on a node, pods on nodes that are no longer eligible or gone, and
//     failed pods are deleted (failed ones come back).
//   - RollingUpdate replaces pods of an old template, at most maxUnavailable (default 1)
//     nodes unavailable at a time; OnDelete leaves them.
//   - status desired/current/misscheduled/ready/updated/available/unavailable and
//     observedGeneration; Events SuccessfulCreate/SuccessfulDelete/FailedCreate.
//
// Decisions (nodes.go) are pure and tested with tables. Expectations (package expectations)
// keep it from creating twice for a node while its cache lags. It talks to the API
// server only through client-go (informers on DaemonSets, ControllerRevisions, Pods and
// Nodes).
package daemonset
