// Package cloudnodelifecycle is the cloud-controller-manager's node lifecycle
// controller ("cloud-node-lifecycle-controller"): it tells Nodes whose kubelet stopped
// reporting what happened to their instance.
//
// Every Config.NodeMonitorPeriod (5 s) it looks at each Node that is not Ready (its Ready
// condition False or Unknown) and asks the cloud about its instance:
//   - stopping or stopped: the node gets the taint
//     node.cloudprovider.kubernetes.io/shutdown:NoSchedule;
//   - terminated or unknown: the Node is deleted (event DeletingNode, "Deleting node <name>
//     because it does not exist in the cloud provider"); its pods are then orphans the pod
//     garbage collector removes, and the attach/detach controller detaches its volumes.
//
// A Ready node loses the shutdown taint. Decisions are pure (decide.go); the controller
// reaches the cloud only through cloudprovider.Instances and the API server only through
// client-go.
package cloudnodelifecycle
