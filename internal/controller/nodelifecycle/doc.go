// Package nodelifecycle is the node lifecycle controller of the controller-manager
// ("node-controller"), with the taint-based eviction of upstream's taint-eviction
// controller ("taint-eviction-controller").
//
// Contract:
//   - Registration: the first time the controller sees a node it records a
//     RegisteredNode event ("Node <name> event: Registered Node <name> in Controller"),
//     and a RemovingNode event ("... Removing Node <name> from Controller") once the node
//     is gone.
//   - Health: a node is healthy while its Lease in kube-node-lease (or its Ready
//     condition's heartbeat) keeps moving. When neither has moved for
//     Config.NodeMonitorGracePeriod (40 s by default; measured on this controller's clock
//     from when it last saw a change, so clock skew does not matter), its Ready,
//     MemoryPressure, DiskPressure and PIDPressure conditions turn Unknown (reason
//     NodeStatusUnknown, "Kubelet stopped posting node status."), its pods are marked not
//     Ready, and, if it was Ready, a NodeNotReady event is recorded ("Node <name> status
//     is now: NodeNotReady").
//   - Taints follow the Ready condition: False → node.kubernetes.io/not-ready, Unknown →
//     node.kubernetes.io/unreachable, each with effects NoSchedule and NoExecute; True →
//     neither. A cordoned node (spec.unschedulable, `kubectl cordon`) also carries
//     node.kubernetes.io/unschedulable:NoSchedule, removed when it is uncordoned. Other
//     taints are left alone. A node update that changes its cordon, Ready status or
//     taints has its taints reconciled at once; every node is also looked at each pass.
//   - Eviction: a pod on a node with NoExecute taints is deleted when a taint is not
//     tolerated, or once the shortest tolerationSeconds of its matching tolerations has
//     passed since the taint was added. Pods without a toleration for not-ready or
//     unreachable are treated as tolerating them for Config.DefaultTolerationSeconds
//     (300 s), as the DefaultTolerationSeconds admission plugin would have given them.
//     Each eviction records a TaintManagerEviction event on the pod.
//
// Decisions (decide.go) are pure and tested with tables. The controller looks at every
// node each Config.NodeMonitorPeriod (5 s). It talks to the API server only through
// client-go (informers on Nodes, Leases and Pods; node updates and node and pod status
// updates, pod deletes, events).
package nodelifecycle
