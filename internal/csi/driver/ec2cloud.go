package driver

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// EC2Config says how to reach the EC2 API.
type EC2Config struct {
	// Endpoint is the EC2 endpoint URL (empty: the SDK's, which honours AWS_EC2_ENDPOINT).
	Endpoint string
	// Region (empty: from AWS_REGION or the config file).
	Region string
	// ConfigFile and CredentialsFile are shared AWS config files (empty: the SDK's
	// defaults, AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE).
	ConfigFile, CredentialsFile string
}

// EC2Cloud is the Cloud over the EC2 Query API, through aws-sdk-go-v2, exactly as
// the upstream driver reaches AWS.
type EC2Cloud struct {
	client *ec2.Client
}

var _ Cloud = (*EC2Cloud)(nil)

// NewEC2Cloud loads the AWS configuration and returns the cloud client. The SDK's
// own use of IMDS (for region or role credentials) is turned off: credentials come
// from the environment or the shared files, never from a metadata address.
func NewEC2Cloud(ctx context.Context, cfg EC2Config) (*EC2Cloud, error) {
	opts := []func(*config.LoadOptions) error{config.WithEC2IMDSClientEnableState(imds.ClientDisabled)}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.ConfigFile != "" {
		opts = append(opts, config.WithSharedConfigFiles([]string{cfg.ConfigFile}))
	}
	if cfg.CredentialsFile != "" {
		opts = append(opts, config.WithSharedCredentialsFiles([]string{cfg.CredentialsFile}))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load aws config: %w", err)
	}
	if awsCfg.Region == "" {
		return nil, errors.New("aws config names no region: set --region, AWS_REGION or the config file's region")
	}
	client := ec2.NewFromConfig(awsCfg, func(o *ec2.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	})
	return &EC2Cloud{client: client}, nil
}

// ec2Error maps an EC2 error code to the driver's sentinel errors.
func ec2Error(op string, err error) error {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return fmt.Errorf("ec2 %s: %w", op, err)
	}
	code, msg := ae.ErrorCode(), ae.ErrorMessage()
	var sentinel error
	switch code {
	case "InvalidVolume.NotFound", "InvalidVolumeID.Malformed", "InvalidInstanceID.NotFound",
		"InvalidInstanceID.Malformed", "InvalidAttachment.NotFound", "InvalidSnapshot.NotFound",
		"InvalidSnapshotID.Malformed", "InvalidID":
		sentinel = ErrNotFound
	case "IdempotentParameterMismatch":
		sentinel = ErrIdempotentParams
	case "InvalidVolume.ZoneMismatch":
		sentinel = ErrZoneMismatch
	case "AttachmentLimitExceeded":
		sentinel = ErrAttachLimit
	case "VolumeLimitExceeded", "SnapshotLimitExceeded":
		sentinel = ErrVolumeLimit
	case "IncorrectState", "VolumeInUse", "IncorrectInstanceState", "InvalidSnapshot.InUse":
		sentinel = ErrIncorrectState
	case "InvalidParameterValue":
		if strings.Contains(msg, "already in use") {
			sentinel = ErrDeviceInUse
		} else {
			sentinel = ErrInvalidParameter
		}
	case "InvalidParameter", "InvalidParameterCombination", "MissingParameter", "UnknownParameter":
		sentinel = ErrInvalidParameter
	case "InvalidAction", "UnsupportedOperation":
		sentinel = ErrUnsupported
	}
	if sentinel == nil {
		return fmt.Errorf("ec2 %s: %s: %s", op, code, msg)
	}
	return fmt.Errorf("ec2 %s: %s: %s: %w", op, code, msg, sentinel)
}

func tagSpec(rt types.ResourceType, tags map[string]string) []types.TagSpecification {
	if len(tags) == 0 {
		return nil
	}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	spec := types.TagSpecification{ResourceType: rt}
	for _, k := range keys {
		spec.Tags = append(spec.Tags, types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	return []types.TagSpecification{spec}
}

func tagMap(tags []types.Tag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}

func diskFrom(v types.Volume) *Disk {
	d := &Disk{
		ID:          aws.ToString(v.VolumeId),
		SizeGiB:     aws.ToInt32(v.Size),
		Zone:        aws.ToString(v.AvailabilityZone),
		State:       string(v.State),
		Type:        string(v.VolumeType),
		IOPS:        aws.ToInt32(v.Iops),
		Throughput:  aws.ToInt32(v.Throughput),
		SnapshotID:  aws.ToString(v.SnapshotId),
		SourceID:    aws.ToString(v.SourceVolumeId),
		MultiAttach: aws.ToBool(v.MultiAttachEnabled),
		Tags:        tagMap(v.Tags),
	}
	for _, a := range v.Attachments {
		d.Attachments = append(d.Attachments, Attachment{
			InstanceID: aws.ToString(a.InstanceId),
			Device:     aws.ToString(a.Device),
			State:      string(a.State),
		})
	}
	return d
}

func snapshotFrom(s types.Snapshot) *Snapshot {
	return &Snapshot{
		ID:           aws.ToString(s.SnapshotId),
		VolumeID:     aws.ToString(s.VolumeId),
		SizeGiB:      aws.ToInt32(s.VolumeSize),
		State:        string(s.State),
		CreationTime: aws.ToTime(s.StartTime),
		Tags:         tagMap(s.Tags),
	}
}

func (c *EC2Cloud) CreateVolume(ctx context.Context, in CreateVolumeInput) (*Disk, error) {
	req := &ec2.CreateVolumeInput{
		AvailabilityZone:  aws.String(in.Zone),
		ClientToken:       aws.String(in.ClientToken),
		Size:              aws.Int32(in.SizeGiB),
		VolumeType:        types.VolumeType(in.Type),
		TagSpecifications: tagSpec(types.ResourceTypeVolume, in.Tags),
	}
	if in.IOPS > 0 {
		req.Iops = aws.Int32(in.IOPS)
	}
	if in.Throughput > 0 {
		req.Throughput = aws.Int32(in.Throughput)
	}
	if in.Encrypted {
		req.Encrypted = aws.Bool(true)
		if in.KMSKeyID != "" {
			req.KmsKeyId = aws.String(in.KMSKeyID)
		}
	}
	if in.SnapshotID != "" {
		req.SnapshotId = aws.String(in.SnapshotID)
	}
	if in.MultiAttach {
		req.MultiAttachEnabled = aws.Bool(true)
	}
	out, err := c.client.CreateVolume(ctx, req)
	if err != nil {
		return nil, ec2Error("CreateVolume", err)
	}
	d := &Disk{
		ID: aws.ToString(out.VolumeId), SizeGiB: aws.ToInt32(out.Size), Zone: aws.ToString(out.AvailabilityZone),
		State: string(out.State), Type: string(out.VolumeType), SnapshotID: aws.ToString(out.SnapshotId),
		MultiAttach: aws.ToBool(out.MultiAttachEnabled), Tags: tagMap(out.Tags),
	}
	return d, nil
}

func (c *EC2Cloud) CopyVolume(ctx context.Context, in CopyVolumeInput) (*Disk, error) {
	out, err := c.client.CopyVolumes(ctx, &ec2.CopyVolumesInput{
		SourceVolumeId:    aws.String(in.SourceVolumeID),
		ClientToken:       aws.String(in.ClientToken),
		Size:              aws.Int32(in.SizeGiB),
		TagSpecifications: tagSpec(types.ResourceTypeVolume, in.Tags),
	})
	if err != nil {
		return nil, ec2Error("CopyVolumes", err)
	}
	if len(out.Volumes) == 0 {
		return nil, errors.New("ec2 CopyVolumes: answer names no volume")
	}
	return diskFrom(out.Volumes[0]), nil
}

func (c *EC2Cloud) DeleteVolume(ctx context.Context, volumeID string) error {
	if _, err := c.client.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: aws.String(volumeID)}); err != nil {
		return ec2Error("DeleteVolume", err)
	}
	return nil
}

func (c *EC2Cloud) DescribeVolume(ctx context.Context, volumeID string) (*Disk, error) {
	out, err := c.client.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{volumeID}})
	if err != nil {
		return nil, ec2Error("DescribeVolumes", err)
	}
	if len(out.Volumes) == 0 {
		return nil, fmt.Errorf("volume %s: %w", volumeID, ErrNotFound)
	}
	return diskFrom(out.Volumes[0]), nil
}

func (c *EC2Cloud) FindVolumesByName(ctx context.Context, name string) ([]*Disk, error) {
	var disks []*Disk
	p := ec2.NewDescribeVolumesPaginator(c.client, &ec2.DescribeVolumesInput{
		Filters: []types.Filter{{Name: aws.String("tag:" + TagVolumeName), Values: []string{name}}},
	})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, ec2Error("DescribeVolumes", err)
		}
		for _, v := range out.Volumes {
			if v.State == types.VolumeStateDeleting || v.State == types.VolumeStateDeleted {
				continue
			}
			disks = append(disks, diskFrom(v))
		}
	}
	return disks, nil
}

func (c *EC2Cloud) AttachVolume(ctx context.Context, volumeID, instanceID, device string) error {
	_, err := c.client.AttachVolume(ctx, &ec2.AttachVolumeInput{
		VolumeId: aws.String(volumeID), InstanceId: aws.String(instanceID), Device: aws.String(device),
	})
	if err != nil {
		return ec2Error("AttachVolume", err)
	}
	return nil
}

func (c *EC2Cloud) DetachVolume(ctx context.Context, volumeID, instanceID string) error {
	_, err := c.client.DetachVolume(ctx, &ec2.DetachVolumeInput{
		VolumeId: aws.String(volumeID), InstanceId: aws.String(instanceID),
	})
	if err != nil {
		return ec2Error("DetachVolume", err)
	}
	return nil
}

func (c *EC2Cloud) ModifyVolumeSize(ctx context.Context, volumeID string, sizeGiB int32) (string, error) {
	out, err := c.client.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: aws.String(volumeID), Size: aws.Int32(sizeGiB)})
	if err != nil {
		return "", ec2Error("ModifyVolume", err)
	}
	if out.VolumeModification == nil {
		return "", nil
	}
	return string(out.VolumeModification.ModificationState), nil
}

func (c *EC2Cloud) DescribeVolumeModification(ctx context.Context, volumeID string) (string, error) {
	out, err := c.client.DescribeVolumesModifications(ctx, &ec2.DescribeVolumesModificationsInput{VolumeIds: []string{volumeID}})
	if err != nil {
		return "", ec2Error("DescribeVolumesModifications", err)
	}
	if len(out.VolumesModifications) == 0 {
		return "", fmt.Errorf("volume %s has no modification: %w", volumeID, ErrNotFound)
	}
	latest := out.VolumesModifications[0]
	for _, m := range out.VolumesModifications[1:] {
		if aws.ToTime(m.StartTime).After(aws.ToTime(latest.StartTime)) {
			latest = m
		}
	}
	return string(latest.ModificationState), nil
}

func (c *EC2Cloud) DescribeInstance(ctx context.Context, instanceID string) (*Instance, error) {
	out, err := c.client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{instanceID}})
	if err != nil {
		return nil, ec2Error("DescribeInstances", err)
	}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			if aws.ToString(i.InstanceId) != instanceID {
				continue
			}
			state := ""
			if i.State != nil {
				state = string(i.State.Name)
			}
			if state == string(types.InstanceStateNameTerminated) {
				return nil, fmt.Errorf("instance %s is terminated: %w", instanceID, ErrNotFound)
			}
			inst := &Instance{ID: instanceID, Type: string(i.InstanceType), State: state, Devices: map[string]string{}}
			if i.Placement != nil {
				inst.Zone = aws.ToString(i.Placement.AvailabilityZone)
			}
			for _, m := range i.BlockDeviceMappings {
				vol := ""
				if m.Ebs != nil {
					vol = aws.ToString(m.Ebs.VolumeId)
				}
				inst.Devices[aws.ToString(m.DeviceName)] = vol
			}
			return inst, nil
		}
	}
	return nil, fmt.Errorf("instance %s: %w", instanceID, ErrNotFound)
}

func (c *EC2Cloud) CreateSnapshot(ctx context.Context, in CreateSnapshotInput) (*Snapshot, error) {
	out, err := c.client.CreateSnapshot(ctx, &ec2.CreateSnapshotInput{
		VolumeId:          aws.String(in.VolumeID),
		Description:       aws.String(in.Description),
		TagSpecifications: tagSpec(types.ResourceTypeSnapshot, in.Tags),
	})
	if err != nil {
		return nil, ec2Error("CreateSnapshot", err)
	}
	return &Snapshot{
		ID: aws.ToString(out.SnapshotId), VolumeID: aws.ToString(out.VolumeId), SizeGiB: aws.ToInt32(out.VolumeSize),
		State: string(out.State), CreationTime: aws.ToTime(out.StartTime), Tags: tagMap(out.Tags),
	}, nil
}

func (c *EC2Cloud) DeleteSnapshot(ctx context.Context, snapshotID string) error {
	if _, err := c.client.DeleteSnapshot(ctx, &ec2.DeleteSnapshotInput{SnapshotId: aws.String(snapshotID)}); err != nil {
		return ec2Error("DeleteSnapshot", err)
	}
	return nil
}

func (c *EC2Cloud) DescribeSnapshot(ctx context.Context, snapshotID string) (*Snapshot, error) {
	out, err := c.client.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{SnapshotIds: []string{snapshotID}})
	if err != nil {
		return nil, ec2Error("DescribeSnapshots", err)
	}
	if len(out.Snapshots) == 0 {
		return nil, fmt.Errorf("snapshot %s: %w", snapshotID, ErrNotFound)
	}
	return snapshotFrom(out.Snapshots[0]), nil
}

func (c *EC2Cloud) FindSnapshotsByName(ctx context.Context, name string) ([]*Snapshot, error) {
	var snaps []*Snapshot
	p := ec2.NewDescribeSnapshotsPaginator(c.client, &ec2.DescribeSnapshotsInput{
		Filters: []types.Filter{{Name: aws.String("tag:" + TagSnapshotName), Values: []string{name}}},
	})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, ec2Error("DescribeSnapshots", err)
		}
		for _, s := range out.Snapshots {
			snaps = append(snaps, snapshotFrom(s))
		}
	}
	return snaps, nil
}

func (c *EC2Cloud) ListSnapshots(ctx context.Context, volumeID string, maxResults int32, token string) ([]*Snapshot, string, error) {
	in := &ec2.DescribeSnapshotsInput{}
	if volumeID != "" {
		in.Filters = []types.Filter{{Name: aws.String("volume-id"), Values: []string{volumeID}}}
	}
	if maxResults > 0 {
		in.MaxResults = aws.Int32(maxResults)
	}
	if token != "" {
		in.NextToken = aws.String(token)
	}
	out, err := c.client.DescribeSnapshots(ctx, in)
	if err != nil {
		return nil, "", ec2Error("DescribeSnapshots", err)
	}
	snaps := make([]*Snapshot, 0, len(out.Snapshots))
	for _, s := range out.Snapshots {
		snaps = append(snaps, snapshotFrom(s))
	}
	return snaps, aws.ToString(out.NextToken), nil
}

func (c *EC2Cloud) AvailabilityZones(ctx context.Context) ([]string, error) {
	out, err := c.client.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	if err != nil {
		return nil, ec2Error("DescribeAvailabilityZones", err)
	}
	var zones []string
	for _, z := range out.AvailabilityZones {
		if z.State == types.AvailabilityZoneStateAvailable || z.State == "" {
			zones = append(zones, aws.ToString(z.ZoneName))
		}
	}
	return zones, nil
}
