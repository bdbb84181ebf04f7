// Package csiclient is what kubelab's CSI sidecars share about talking to a CSI
// driver: dialling its unix socket, waiting for Probe to answer ready and learning
// the driver's name and capabilities (Discover), turning a Kubernetes volume's
// access modes and mode into CSI volume capabilities, the Event recorder of a
// sidecar, the retry classification of gRPC errors (IsFinal), and the controller
// plumbing every sidecar shares: its tuning (Tuning: workers, call timeout, backoff,
// logger), the driver check at start (DiscoverDriver), its rate-limited queue
// (NewQueue) and worker loop (Work), and the index of VolumeAttachments by PV
// (IndexAttachmentsByPV).
//
// It is the sidecars' side of the wire "CSI gRPC on the driver's socket" (the
// external-provisioner, -attacher, -resizer and -snapshotter and the
// node-driver-registrar use it); nothing here calls the driver's Go package.
package csiclient
