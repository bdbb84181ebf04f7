// Package attachdetach is the attach/detach controller of the controller-manager
// ("attachdetach-controller"): it keeps one VolumeAttachment for each (CSI volume,
// node) that a scheduled pod needs, removes it when no pod on that node needs it
// any more and the node has stopped using it, and reports what is attached in the
// node's status.volumesAttached.
//
// It is the attach step of the storage flow: once a pod whose claim is bound to a PV
// is scheduled, it creates the VolumeAttachment that the external-attacher carries out.
// For every node, the desired set is the volumes of its pods
// that are not terminated (phase Succeeded/Failed, or deleted with no container
// running), whose claim is Bound to a CSI PV of a driver that requires attach
// (CSIDriver.spec.attachRequired, true when unset or when there is no CSIDriver
// object). Each gets a VolumeAttachment named csi-<sha256(volumeHandle + driver +
// nodeName)> (spec.attacher, spec.nodeName, spec.source.persistentVolumeName), as
// the kubelet and upstream name it. A volume that only allows one node
// (ReadWriteOnce/ReadWriteOncePod) and already has an attachment to another node is
// not attached; the pod gets FailedAttachVolume "Multi-Attach error ...".
// An attachment nobody needs is deleted (the external-attacher then detaches) once
// the node's status.volumesInUse no longer lists the volume's unique name
// kubernetes.io/csi/<driver>^<volumeHandle>; on a node that is gone, or tainted
// node.kubernetes.io/out-of-service, at once; on an unhealthy (not Ready) node after
// Config.MaxWaitForUnmount (6 minutes, as upstream). The node's
// status.volumesAttached lists the unique names of its attached volumes; when a
// volume joins it the pods get SuccessfulAttachVolume, and an attachError of the
// attacher reaches them as FailedAttachVolume.
//
// Nodes are managed unless they carry
// volumes.kubernetes.io/controller-managed-attach-detach with a value other than
// "true" (upstream requires the kubelet to set it; absent counts as managed here).
//
// Contract: client-go only; New(cfg, client, factory) registers informers on the
// shared factory; the key is a node name and sync(ctx, node) is idempotent; the
// decision (planNode) is a pure function tested with tables.
package attachdetach
