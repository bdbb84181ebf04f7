// Package controllertest holds test helpers shared by the controller packages of the
// controller-manager. It is imported only from _test.go files.
//
// WaitFor and WaitWithin (wait.go) poll a condition until it holds or fail the test;
// EventsAbout and HasEvent (events.go) read the Events about an object.
// RunController (run.go) runs a controller on its own informer factory until the test
// ends, failing it if the controller's Run returns an error.
// Kubelet (kubelet.go) plays the scheduler and the kubelet for the pods of one
// namespace against a real API server through client-go, so workload controller tests
// (Deployment, ReplicaSet, StatefulSet, DaemonSet) can watch pods become
// bound, Running and Ready, and deletions complete, without a real node.
//
// Contract: RunKubelet starts it and registers its stop in t.Cleanup; it touches only
// the pods of the namespace it is given.
package controllertest
