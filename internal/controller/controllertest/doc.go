// Package controllertest holds test helpers shared by the controller packages of the
// controller-manager and by the tests that play a node without running one. It is
// imported only from _test.go files.
//
// EventsAbout and HasEvent (events.go) read the Events about an object.
// RunController (run.go) runs a controller on its own informer factory until the test
// ends (testutil.Start), failing it if the controller's Run returns an error.
//
// The one fake node: AddNode (node.go) registers a node as its kubelet and
// node-driver-registrar would (the Node, Ready, and its CSINode), and Kubelet
// (kubelet.go) plays the scheduler and the kubelet for the pods of one namespace against
// a real API server through client-go, so workload controller tests (Deployment,
// ReplicaSet, StatefulSet, DaemonSet) can watch pods become bound, Running and Ready, and
// deletions complete, without a real node. Tests that need a real or hollow kubelet
// start a whole cluster with clustertest instead.
//
// WaitFor, WaitWithin and WaitNoError (wait.go) are deprecated wrappers of
// testutil.Eventually and EventuallyWithin, kept while tests still call them.
//
// Contract: RunKubelet starts it and registers its stop in t.Cleanup; it touches only
// the pods of the namespace it is given.
package controllertest
