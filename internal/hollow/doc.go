// Package hollow is the hollow-node contract: what a hollow node (a kubelet with a fake
// runtime and mounter, for scale tests without root) says about itself, and what a pod
// asks of it in annotations. The hollow kubelet, the fake CRI runtime of the kubelet's
// tests and the tests that drive hollow clusters all read these definitions here.
//
//   - runtime.go: the runtime a hollow node reports: RuntimeName ("hollow"), the
//     container ID prefix "hollow://" and RuntimeVersion ("hollow://<kubelab
//     version>", node.status.nodeInfo.containerRuntimeVersion).
//   - usage.go: the usage a hollow container reports (Usage): the annotations
//     kubelab.dev/hollow-cpu-usage and kubelab.dev/hollow-memory-usage, a quantity each
//     per container. The hollow kubelet's Summary API (/stats/summary) reports it, so
//     the API server's metrics.k8s.io reads a hollow node's usage from its kubelet as
//     from any node's.
//   - exit.go: the run time of a hollow container (Exit): the annotations
//     kubelab.dev/hollow-run-seconds and kubelab.dev/hollow-exit-code.
//
// It is a leaf: it imports no component, so the kubelet, its fake runtime and the tests
// share it without importing each other.
package hollow
