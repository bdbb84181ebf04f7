// Package volumeutil holds the names the volume flow agrees on across components, so
// each is defined once: the VolumeAttachment name of a CSI volume on a node (which the
// attach/detach controller creates and the kubelet reads and hands to the driver), the
// unique name of a CSI volume in node.status.volumesInUse and volumesAttached (which the
// kubelet reports and the controller reads), and the protection finalizers (which the
// API server's StorageObjectInUseProtection admission adds and the pvc/pv-protection
// controller removes).
//
// It implements no step of the flow itself: it is a leaf the components of the attach
// and mount steps import instead of importing each other.
package volumeutil
