// Package resizer is kubelab's external-resizer: the CSI sidecar that grows the
// volume of a bound PersistentVolumeClaim when its spec.resources.requests.storage
// is raised above its PV's capacity.
//
// It is the controller half of volume expansion (the kubelet then calls
// NodeExpandVolume). For a bound claim of this driver whose
// request exceeds the PV's capacity it records the claim's condition Resizing,
// status.allocatedResources and status.allocatedResourceStatuses
// (ControllerResizeInProgress), emits Resizing, calls ControllerExpandVolume with
// the PV's volume handle, new size and capability, and writes the new size to the
// PV's spec.capacity. When the driver asks for node expansion the claim gets the
// condition FileSystemResizePending and the status NodeResizePending (event
// FileSystemResizeRequired) and the kubelet finishes; otherwise the claim's
// status.capacity takes the new size (event VolumeResizeSuccessful). A refused
// resize (InvalidArgument, OutOfRange, ...) sets ControllerResizeInfeasible with a
// ControllerResizeError condition and is not retried until the request changes;
// other failures are retried with backoff (event VolumeResizeFailed either way).
//
// Contract: New(cfg, client, factory, conn) registers informers on the shared
// factory; Run probes the driver and works until ctx ends; decideResize and the
// status builders are pure and tested with tables. Its writes are patches (strategic
// merge, with the read resourceVersion as precondition) of PersistentVolumes and of
// claims' status, as the driver's resizer role allows, and Events.
package resizer
