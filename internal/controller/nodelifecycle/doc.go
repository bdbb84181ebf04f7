// Package nodelifecycle is the node lifecycle controller of the controller-manager
// ("node-controller"), with the taint-based eviction of upstream's taint-eviction
// controller ("taint-eviction-controller").
//
// Contract:
//   - Health: a node is healthy while its Lease in kube-node-lease (or its Ready
//     condition's heartbeat) keeps moving. When neither has moved for
//     Config.NodeMonitorGracePeriod (40 s by default; measured on this controller's clock
//     from when it last saw a change, so clock skew does not matter), its Ready,
//     MemoryPressure, DiskPressure and PIDPressure conditions turn Unknown (reason
//     NodeStatusUnknown, "Kubelet stopped posting node status."), its pods are marked not
//     Ready, and a NodeNotReady event is recorded.
//   - Taints follow the Ready condition: False → node.kubernetes.io/not-ready, Unknown →
//     node.kubernetes.io/unreachable, each with effects NoSchedule and NoExecute; True →
//     neither. Other taints are left alone.
//   - Eviction: a pod on a node with NoExecute taints is deleted when a taint is not
//     tolerated, or once the shortest tolerationSeconds of its matching tolerations has
//     passed since the taint was added. Pods without a toleration for not-ready or
//     unreachable are treated as tolerating them for Config.DefaultTolerationSeconds
//     (300 s), as the DefaultTolerationSeconds admission plugin would have given them.
//     Each eviction records a TaintManagerEviction event on the pod.
//
// Decisions (decide.go) are pure and tested with tables. The controller looks at every
// node each Config.NodeMonitorPeriod (5 s). It talks to the API server only through
// client-go (informers on Nodes, Leases and Pods; node and pod status updates, pod
// deletes).
package nodelifecycle
