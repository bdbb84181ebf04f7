// Package client is kubelab's client side of a CSI driver: what the CSI sidecars
// (external-provisioner, -attacher, -resizer, -snapshotter, node-driver-registrar) and
// the kubelet's plugin manager share about talking to a driver over its socket. It is a
// leaf: it imports no component, so both may import it without importing each other.
//
// It implements the wire "CSI gRPC on the driver's socket" of the volume flow
// (provision → attach → stage/publish → resize → snapshot); nothing here calls the
// driver's Go package. One file per concern:
//
//   - dial.go: Dial and Target, the driver's unix socket as a lazy gRPC connection.
//   - discover.go: Discover (wait for Probe to answer ready, then learn the driver's name
//     and capabilities as Info) and DiscoverDriver (the same for a sidecar configured
//     with a driver name).
//   - errors.go: the retry classification of a CSI call's gRPC error (IsFinal, Code).
//   - capability.go: a Kubernetes volume's access modes and mode as CSI volume
//     capabilities (AccessMode, Capabilities, PVCapability).
//   - tuning.go: Tuning, what every controller sidecar is tuned by (workers, call
//     timeout, backoff, logger).
//   - queue.go: NewQueue, a sidecar's rate-limited work queue (drained by
//     internal/util/worker).
//   - recorder.go: Recorder, the Event recorder of a sidecar.
//   - attachmentindex.go: IndexAttachmentsByPV, the VolumeAttachment informer's index by
//     PersistentVolume.
//   - patch.go: Patch, the strategic merge patch with a resourceVersion precondition the
//     sidecars write with where their roles allow patch and not update.
package client
