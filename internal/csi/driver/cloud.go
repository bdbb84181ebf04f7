package driver

import (
	"context"
	"errors"
	"time"
)

// Cloud is what the controller needs from the EC2 API. Each method is one EC2 call
// (or one paginated Describe); waiting for states is the controller's business.
// The production implementation is EC2Cloud (aws-sdk-go-v2); tests use a fake.
type Cloud interface {
	CreateVolume(ctx context.Context, in CreateVolumeInput) (*Disk, error)
	// CopyVolume clones source into a new volume in the same zone (EC2 CopyVolumes).
	CopyVolume(ctx context.Context, in CopyVolumeInput) (*Disk, error)
	DeleteVolume(ctx context.Context, volumeID string) error
	// DescribeVolume returns ErrNotFound when the volume does not exist.
	DescribeVolume(ctx context.Context, volumeID string) (*Disk, error)
	// FindVolumesByName returns the volumes tagged CSIVolumeName=name.
	FindVolumesByName(ctx context.Context, name string) ([]*Disk, error)
	AttachVolume(ctx context.Context, volumeID, instanceID, device string) error
	DetachVolume(ctx context.Context, volumeID, instanceID string) error
	// ModifyVolumeSize asks for a new size and returns the modification state.
	ModifyVolumeSize(ctx context.Context, volumeID string, sizeGiB int32) (string, error)
	// DescribeVolumeModification returns the state of the latest modification
	// (modifying, optimizing, completed, failed).
	DescribeVolumeModification(ctx context.Context, volumeID string) (string, error)
	DescribeInstance(ctx context.Context, instanceID string) (*Instance, error)
	CreateSnapshot(ctx context.Context, in CreateSnapshotInput) (*Snapshot, error)
	DeleteSnapshot(ctx context.Context, snapshotID string) error
	DescribeSnapshot(ctx context.Context, snapshotID string) (*Snapshot, error)
	FindSnapshotsByName(ctx context.Context, name string) ([]*Snapshot, error)
	// ListSnapshots lists snapshots, of one volume when volumeID is set, a page at a
	// time; maxResults 0 means no limit.
	ListSnapshots(ctx context.Context, volumeID string, maxResults int32, token string) ([]*Snapshot, string, error)
	// AvailabilityZones returns the names of the region's available zones.
	AvailabilityZones(ctx context.Context) ([]string, error)
}

// Volume, attachment and snapshot states as EC2 reports them.
const (
	VolumeCreating  = "creating"
	VolumeAvailable = "available"
	VolumeInUse     = "in-use"
	VolumeDeleting  = "deleting"
	VolumeError     = "error"

	AttachAttaching = "attaching"
	AttachAttached  = "attached"
	AttachDetaching = "detaching"
	AttachDetached  = "detached"

	SnapshotPending   = "pending"
	SnapshotCompleted = "completed"
	SnapshotError     = "error"

	ModModifying  = "modifying"
	ModOptimizing = "optimizing"
	ModCompleted  = "completed"
	ModFailed     = "failed"
)

// Tags the driver sets on what it creates.
const (
	TagVolumeName   = "CSIVolumeName"
	TagSnapshotName = "CSIVolumeSnapshotName"
	TagCluster      = "ebs.csi.aws.com/cluster"
	// TagSourceVolume names the volume a clone was made from, so that a retried
	// CreateVolume can tell a clone of another volume (the cloud reports the source
	// only of volumes made by CopyVolumes).
	TagSourceVolume = "kubelab.dev/source-volume"
)

// Errors the cloud adapter returns, wrapped with the cloud's message; the CSI layer
// turns them into gRPC codes.
var (
	ErrNotFound         = errors.New("not found")
	ErrIdempotentParams = errors.New("idempotent parameter mismatch")
	ErrZoneMismatch     = errors.New("zone mismatch")
	ErrAttachLimit      = errors.New("attachment limit exceeded")
	ErrVolumeLimit      = errors.New("volume limit exceeded")
	ErrDeviceInUse      = errors.New("device name already in use")
	ErrIncorrectState   = errors.New("incorrect state")
	ErrInvalidParameter = errors.New("invalid parameter")
	ErrUnsupported      = errors.New("not supported by the cloud")
)

// Disk is an EBS volume as DescribeVolumes shows it.
type Disk struct {
	ID          string
	SizeGiB     int32
	Zone        string
	State       string
	Type        string
	IOPS        int32
	Throughput  int32
	SnapshotID  string
	SourceID    string // volume it was copied from, when known
	MultiAttach bool
	Tags        map[string]string
	Attachments []Attachment
}

// Attachment is one attachment of a volume to an instance.
type Attachment struct {
	InstanceID string
	Device     string
	State      string
}

// AttachmentTo returns the attachment of d to instanceID, or nil.
func (d *Disk) AttachmentTo(instanceID string) *Attachment {
	for i := range d.Attachments {
		if d.Attachments[i].InstanceID == instanceID {
			return &d.Attachments[i]
		}
	}
	return nil
}

// Instance is an EC2 instance as DescribeInstances shows it.
type Instance struct {
	ID    string
	Zone  string
	Type  string
	State string
	// Devices maps device names (/dev/xvdba) to the volume attached there.
	Devices map[string]string
}

// Snapshot is an EBS snapshot.
type Snapshot struct {
	ID           string
	VolumeID     string
	SizeGiB      int32
	State        string
	CreationTime time.Time
	Tags         map[string]string
}

// CreateVolumeInput is what CreateVolume sends.
type CreateVolumeInput struct {
	ClientToken string
	Zone        string
	SizeGiB     int32
	Type        string
	IOPS        int32
	Throughput  int32
	Encrypted   bool
	KMSKeyID    string
	SnapshotID  string
	MultiAttach bool
	Tags        map[string]string
}

// CopyVolumeInput is what CopyVolumes sends.
type CopyVolumeInput struct {
	ClientToken    string
	SourceVolumeID string
	SizeGiB        int32
	Tags           map[string]string
}

// CreateSnapshotInput is what CreateSnapshot sends.
type CreateSnapshotInput struct {
	VolumeID    string
	Description string
	Tags        map[string]string
}
