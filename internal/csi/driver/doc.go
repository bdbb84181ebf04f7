// Package driver is the EBS CSI driver ebs.csi.aws.com of kubelab: the CSI v1
// Identity, Controller and Node services on a unix socket, started by
// `kubelab csi-driver --mode controller|node|all`.
//
// It does the heavy lifting of the storage flow — it creates, attaches, formats and
// mounts volumes: CreateVolume, DeleteVolume, ControllerPublishVolume and
// ControllerUnpublishVolume in the controller plugin; NodeStageVolume (format +
// mount to the staging path), NodePublishVolume (bind mount into the pod),
// NodeUnpublishVolume, NodeUnstageVolume and NodeExpandVolume in the node plugin.
//
// # Contract
//
// The controller reaches the cloud only through the EC2 Query API, with
// aws-sdk-go-v2 (EC2Cloud), as the upstream driver reaches AWS: volumes are created
// with a ClientToken derived from the CSI name and tagged CSIVolumeName=<name> and
// ebs.csi.aws.com/cluster=true, so a retried CreateVolume finds its volume; the zone
// comes from the accessibility requirements (preferred first, then requisite), else
// Config.DefaultZone (the node's zone in all mode), else the region's first zone.
// ControllerPublishVolume picks a free /dev/xvdXX name on the instance (one attach
// per instance at a time), waits for "attached" and returns it as the publish
// context's devicePath. Snapshots are tagged CSIVolumeSnapshotName=<name>;
// ListSnapshots pages over EC2's pages with its own tokens. Clones use CopyVolumes,
// or a temporary snapshot when the cloud has no CopyVolumes.
//
// The node learns its instance id, zone and type from IMDS (IMDS, aws-sdk-go-v2's
// imds client). It resolves devicePath under Config.DeviceDir, following links,
// falling back to disk/by-id/nvme-Amazon_Elastic_Block_Store_vol<id>; it formats
// only a blank device (ext2/3/4 or xfs with mount-utils' mkfs options and the
// volume context's): a device is blank when every range where blkid looks for a
// signature is zero (read in-process; only when the installed libblkid is one the
// ranges were checked against and a start-up self-check against it passed), and
// anything else is decided by k8s.io/mount-utils SafeFormatAndMount (blkid) as
// upstream does. It grows an ext
// filesystem offline before mounting it when the device grew, bind-mounts staging
// onto targets (ro when asked), binds raw block devices onto files, grows
// filesystems online (resize2fs, xfs_growfs) and reports statfs usage.
//
// Errors are gRPC statuses made at this boundary: InvalidArgument for bad requests
// and unknown StorageClass parameters, NotFound, AlreadyExists (same name, other
// size or source), FailedPrecondition (attached elsewhere, zone mismatch, in use),
// ResourceExhausted (attachment limits), OutOfRange (sizes), Aborted while another
// operation holds the same volume (per-volume operation locks). Every call is
// counted and timed (kubelab_csi_operations_total, kubelab_csi_operation_errors_total,
// kubelab_csi_operation_duration_seconds) and logged with the fields the spec marks
// csi_secret stripped.
//
// In hollow mode (Config.Hollow) the node uses HollowMounter and hollow devices:
// the same CSI behaviour with no root, no loop devices and no mounts.
//
// Shape: Config (+validate), New(cfg, Deps), blocking Run(ctx); the boundaries
// (Cloud, Metadata, Mounter, Devices) are small interfaces with fakes in the tests.
package driver
