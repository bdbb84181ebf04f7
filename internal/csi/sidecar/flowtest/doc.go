// Package flowtest holds the integration tests of kubelab's storage control plane
// on real parts: the kubelab API server (apiservertest), the cloud in hollow mode
// over its EC2 API, the CSI driver ebs.csi.aws.com in controller mode on its unix
// socket, and the PV controller, protection controllers, attach/detach controller,
// external-provisioner and external-attacher, each reaching the others only through
// those wires.
//
// The tests walk the storage flow from claim to attached volume and assert every
// state transition these components own: PVC Pending → provisioned → Bound,
// PV Available → Bound, VolumeAttachment created → attached with a devicePath, the
// PV Released under Retain and the cloud volume deleted under Delete, and a claim
// kept by kubernetes.io/pvc-protection while a pod uses it. The scheduler's and the
// kubelet's parts are played by the test (volume.kubernetes.io/selected-node,
// pods/binding, node status.volumesInUse). A restart test stops and starts the
// components in the middle of the flow and checks that no cloud volume is created
// twice and no attachment is left behind.
//
// The harness (harness_test.go) is not a whole cluster, which clustertest starts: it has
// no scheduler and no kubelet, so that each test can play their steps one at a time and
// stop and start the controllers and sidecars in the middle of the flow. Its nodes are
// controllertest's fake node (AddNode), its cloud, driver and EC2 client the same pieces
// the other harnesses run (testutil.Start, cloudtest.EC2Client).
//
// The package has no non-test code besides this file.
package flowtest
