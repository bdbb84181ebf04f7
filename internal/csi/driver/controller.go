package driver

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// controller is the CSI Controller service: volumes, attachments and snapshots on
// the cloud, through the EC2 API.
type controller struct {
	csi.UnimplementedControllerServer
	d *Driver
}

func (c *controller) cloud() Cloud { return c.d.deps.Cloud }

func (c *controller) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, t := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
		csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
			Rpc: &csi.ControllerServiceCapability_RPC{Type: t},
		}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// clientToken is the EC2 idempotency token for a CSI name: the same name always
// sends the same token, so a retried CreateVolume cannot make a second volume.
func clientToken(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:])[:64]
}

func (c *controller) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	name := req.GetName()
	if name == "" {
		return nil, invalid("volume name is missing")
	}
	caps := req.GetVolumeCapabilities()
	if err := checkCapabilities(caps); err != nil {
		return nil, invalid("volume %s: %v", name, err)
	}
	params, err := parseVolumeParams(req.GetParameters())
	if err != nil {
		return nil, invalid("volume %s: %v", name, err)
	}
	multi := needsMultiAttach(caps)
	if multi && params.Type != "io2" {
		return nil, invalid("volume %s: MULTI_NODE_MULTI_WRITER needs an io2 volume, not %s", name, params.Type)
	}
	size, err := sizeGiB(req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes(), c.d.cfg.DefaultVolumeSizeGiB)
	if err != nil {
		return nil, status.Errorf(codes.OutOfRange, "volume %s: %v", name, err)
	}
	zone, err := pickZone(req.GetAccessibilityRequirements())
	if err != nil {
		return nil, invalid("volume %s: %v", name, err)
	}
	key := "name/" + name
	if !c.d.ctrlLocks.tryLock(key) {
		return nil, aborted("volume " + name)
	}
	defer c.d.ctrlLocks.unlock(key)

	// Content source: a snapshot or a volume, which must exist.
	var snapshotID, sourceVolumeID string
	var srcDisk *Disk
	explicitSize := req.GetCapacityRange().GetRequiredBytes() > 0
	if src := req.GetVolumeContentSource(); src != nil {
		switch {
		case src.GetSnapshot() != nil:
			snapshotID = src.GetSnapshot().GetSnapshotId()
			if snapshotID == "" {
				return nil, invalid("volume %s: snapshot source has no snapshot id", name)
			}
			snap, err := c.cloud().DescribeSnapshot(ctx, snapshotID)
			if err != nil {
				return nil, cloudStatus(err, "volume %s: source snapshot %s", name, snapshotID)
			}
			// No size asked: the snapshot's.
			if !explicitSize {
				size = snap.SizeGiB
			} else if size < snap.SizeGiB {
				return nil, status.Errorf(codes.OutOfRange, "volume %s: %d GiB is smaller than snapshot %s (%d GiB)", name, size, snapshotID, snap.SizeGiB)
			}
		case src.GetVolume() != nil:
			sourceVolumeID = src.GetVolume().GetVolumeId()
			if sourceVolumeID == "" {
				return nil, invalid("volume %s: volume source has no volume id", name)
			}
			srcDisk, err = c.cloud().DescribeVolume(ctx, sourceVolumeID)
			if err != nil {
				return nil, cloudStatus(err, "volume %s: source volume %s", name, sourceVolumeID)
			}
			if !zoneAllowed(req.GetAccessibilityRequirements(), srcDisk.Zone) {
				return nil, invalid("volume %s: source volume %s is in %s, outside the requested topology", name, sourceVolumeID, srcDisk.Zone)
			}
			zone = srcDisk.Zone
			if !explicitSize {
				size = srcDisk.SizeGiB
			} else if size < srcDisk.SizeGiB {
				return nil, status.Errorf(codes.OutOfRange, "volume %s: %d GiB is smaller than source volume %s (%d GiB)", name, size, sourceVolumeID, srcDisk.SizeGiB)
			}
		default:
			return nil, invalid("volume %s: unknown volume content source", name)
		}
	}

	// Idempotency: a volume with this name already exists.
	existing, err := c.cloud().FindVolumesByName(ctx, name)
	if err != nil {
		return nil, cloudStatus(err, "volume %s: look up by name", name)
	}
	if len(existing) > 0 {
		e := existing[0]
		if msg := sameVolume(e, size, params.Type, snapshotID, sourceVolumeID, req.GetAccessibilityRequirements()); msg != "" {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s exists as %s %s", name, e.ID, msg)
		}
		disk, err := c.waitAvailable(ctx, e.ID)
		if err != nil {
			return nil, err
		}
		return c.volumeResponse(disk, params, req.GetVolumeContentSource()), nil
	}

	if zone == "" {
		if zone, err = c.defaultZone(ctx); err != nil {
			return nil, err
		}
	}
	tags := map[string]string{}
	for k, v := range c.d.cfg.ExtraTags {
		tags[k] = v
	}
	for k, v := range params.Tags {
		tags[k] = v
	}
	tags[TagVolumeName] = name
	tags[TagCluster] = "true"
	if sourceVolumeID != "" {
		tags[TagSourceVolume] = sourceVolumeID
	}

	var disk *Disk
	var tempSnapshot string
	if sourceVolumeID != "" {
		disk, err = c.cloud().CopyVolume(ctx, CopyVolumeInput{
			ClientToken: clientToken(name), SourceVolumeID: sourceVolumeID, SizeGiB: size, Tags: tags,
		})
		if errors.Is(err, ErrUnsupported) {
			// A cloud without CopyVolumes: clone through a snapshot, as the driver
			// did before EBS had CopyVolumes.
			disk, tempSnapshot, err = c.cloneViaSnapshot(ctx, name, srcDisk, size, params, tags)
		}
	} else {
		disk, err = c.cloud().CreateVolume(ctx, CreateVolumeInput{
			ClientToken: clientToken(name),
			Zone:        zone,
			SizeGiB:     size,
			Type:        params.Type,
			IOPS:        params.iopsFor(size),
			Throughput:  params.Throughput,
			Encrypted:   params.Encrypted,
			KMSKeyID:    params.KMSKeyID,
			SnapshotID:  snapshotID,
			MultiAttach: multi,
			Tags:        tags,
		})
	}
	if err != nil {
		return nil, cloudStatus(err, "create volume %s in %s", name, zone)
	}
	ready, err := c.waitAvailable(ctx, disk.ID)
	if err != nil && tempSnapshot != "" {
		if derr := c.cloud().DeleteSnapshot(context.WithoutCancel(ctx), tempSnapshot); derr != nil {
			c.d.log.Error("delete clone snapshot", "snapshot", tempSnapshot, "error", derr)
		}
	}
	if err != nil {
		if st, ok := status.FromError(err); ok && st.Code() == codes.Internal {
			// The volume failed: leave nothing half-made behind.
			if derr := c.cloud().DeleteVolume(context.WithoutCancel(ctx), disk.ID); derr != nil {
				c.d.log.Error("delete failed volume", "volume", disk.ID, "error", derr)
			}
		}
		return nil, err
	}
	if tempSnapshot != "" {
		if err := c.cloud().DeleteSnapshot(ctx, tempSnapshot); err != nil {
			c.d.log.Error("delete clone snapshot", "snapshot", tempSnapshot, "error", err)
		}
	}
	c.d.log.Info("volume created", "name", name, "volume", ready.ID, "zone", ready.Zone, "size_gib", ready.SizeGiB)
	return c.volumeResponse(ready, params, req.GetVolumeContentSource()), nil
}

// sameVolume says how the existing volume e of a CreateVolume's name differs from what
// the request asks (its size, type, content source or topology), or "" when it is the
// same: a retry gets the volume, a different request AlreadyExists.
func sameVolume(e *Disk, size int32, volumeType, snapshotID, sourceVolumeID string, topology *csi.TopologyRequirement) string {
	source := e.SourceID
	if source == "" {
		source = e.Tags[TagSourceVolume]
	}
	switch {
	case e.SizeGiB != size:
		return fmt.Sprintf("with %d GiB, not %d GiB", e.SizeGiB, size)
	case e.Type != "" && e.Type != volumeType:
		return fmt.Sprintf("of type %s, not %s", e.Type, volumeType)
	case snapshotID != "" && e.SnapshotID != snapshotID:
		return fmt.Sprintf("from snapshot %q, not %q", e.SnapshotID, snapshotID)
	case sourceVolumeID != "" && source != sourceVolumeID:
		return fmt.Sprintf("from volume %q, not %q", source, sourceVolumeID)
	case !zoneAllowed(topology, e.Zone):
		return fmt.Sprintf("in %s, outside the requested topology", e.Zone)
	}
	return ""
}

// cloneViaSnapshot snapshots src, waits for the snapshot and creates the clone
// from it; the caller deletes the snapshot once the clone is available.
func (c *controller) cloneViaSnapshot(ctx context.Context, name string, src *Disk, size int32, p volumeParams, tags map[string]string) (*Disk, string, error) {
	snap, err := c.cloud().CreateSnapshot(ctx, CreateSnapshotInput{
		VolumeID:    src.ID,
		Description: "Clone of " + src.ID + " for " + name,
		Tags:        map[string]string{TagCluster: "true", "kubelab.dev/clone-for": name},
	})
	if err != nil {
		return nil, "", fmt.Errorf("snapshot %s for clone: %w", src.ID, err)
	}
	err = c.d.poll(ctx, "snapshot "+snap.ID+" of "+src.ID, func(ctx context.Context) (bool, error) {
		s, err := c.cloud().DescribeSnapshot(ctx, snap.ID)
		if err != nil {
			return false, err
		}
		switch s.State {
		case SnapshotCompleted:
			return true, nil
		case SnapshotError:
			return false, fmt.Errorf("snapshot %s failed", snap.ID)
		}
		return false, nil
	})
	if err == nil {
		var disk *Disk
		disk, err = c.cloud().CreateVolume(ctx, CreateVolumeInput{
			ClientToken: clientToken(name), Zone: src.Zone, SizeGiB: size, Type: p.Type,
			IOPS: p.iopsFor(size), Throughput: p.Throughput, Encrypted: p.Encrypted, KMSKeyID: p.KMSKeyID,
			SnapshotID: snap.ID, Tags: tags,
		})
		if err == nil {
			return disk, snap.ID, nil
		}
	}
	if derr := c.cloud().DeleteSnapshot(context.WithoutCancel(ctx), snap.ID); derr != nil {
		c.d.log.Error("delete clone snapshot", "snapshot", snap.ID, "error", derr)
	}
	return nil, "", err
}

func (c *controller) volumeResponse(d *Disk, p volumeParams, src *csi.VolumeContentSource) *csi.CreateVolumeResponse {
	var vctx map[string]string
	if len(p.Context) > 0 {
		vctx = p.Context
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:           d.ID,
		CapacityBytes:      int64(d.SizeGiB) * GiB,
		VolumeContext:      vctx,
		ContentSource:      src,
		AccessibleTopology: []*csi.Topology{zoneTopology(d.Zone)},
	}}
}

// waitAvailable waits for a new volume to leave "creating".
func (c *controller) waitAvailable(ctx context.Context, id string) (*Disk, error) {
	var disk *Disk
	err := c.d.poll(ctx, "volume "+id+" to be available", func(ctx context.Context) (bool, error) {
		d, err := c.cloud().DescribeVolume(ctx, id)
		if err != nil {
			return false, err
		}
		disk = d
		switch d.State {
		case VolumeAvailable, VolumeInUse:
			return true, nil
		case VolumeCreating:
			return false, nil
		default:
			return false, fmt.Errorf("volume %s is %s", id, d.State)
		}
	})
	if err != nil {
		return nil, cloudStatus(err, "wait for volume %s", id)
	}
	return disk, nil
}

func (c *controller) defaultZone(ctx context.Context) (string, error) {
	if c.d.cfg.DefaultZone != "" {
		return c.d.cfg.DefaultZone, nil
	}
	zones, err := c.cloud().AvailabilityZones(ctx)
	if err != nil {
		return "", cloudStatus(err, "list availability zones")
	}
	if len(zones) == 0 {
		return "", status.Error(codes.Unavailable, "the region has no available zone")
	}
	sort.Strings(zones)
	return zones[0], nil
}

// lockID checks that the request named the id of its kind ("volume", "snapshot") and
// takes that id's in-flight lock, answering Aborted while another call holds it. The
// caller defers the returned unlock.
func (c *controller) lockID(kind, id string) (unlock func(), err error) {
	if id == "" {
		return nil, invalid("%s id is missing", kind)
	}
	if !c.d.ctrlLocks.tryLock(id) {
		return nil, aborted(id)
	}
	return func() { c.d.ctrlLocks.unlock(id) }, nil
}

func (c *controller) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id := req.GetVolumeId()
	unlock, err := c.lockID("volume", id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := c.cloud().DeleteVolume(ctx, id); err != nil {
		if errors.Is(err, ErrNotFound) {
			return &csi.DeleteVolumeResponse{}, nil
		}
		return nil, cloudStatus(err, "delete volume %s", id)
	}
	c.d.log.Info("volume deleted", "volume", id)
	return &csi.DeleteVolumeResponse{}, nil
}

func (c *controller) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, invalid("volume id is missing")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, invalid("volume %s: volume capabilities are missing", id)
	}
	disk, err := c.cloud().DescribeVolume(ctx, id)
	if err != nil {
		return nil, cloudStatus(err, "volume %s", id)
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	if needsMultiAttach(req.GetVolumeCapabilities()) && !disk.MultiAttach {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: "volume " + id + " is not Multi-Attach enabled"}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}

// DevicePathKey is the publish-context key carrying the device name of the
// attachment to NodeStageVolume.
const DevicePathKey = "devicePath"

func (c *controller) nodeMutex(instanceID string) *sync.Mutex {
	m, _ := c.d.nodeLocks.LoadOrStore(instanceID, &sync.Mutex{})
	return m.(*sync.Mutex)
}

func (c *controller) ControllerPublishVolume(ctx context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	volID, nodeID := req.GetVolumeId(), req.GetNodeId()
	switch {
	case volID == "":
		return nil, invalid("volume id is missing")
	case nodeID == "":
		return nil, invalid("volume %s: node id is missing", volID)
	case req.GetVolumeCapability() == nil:
		return nil, invalid("volume %s: volume capability is missing", volID)
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, invalid("volume %s: %v", volID, err)
	}
	if !c.d.ctrlLocks.tryLock(volID) {
		return nil, aborted(volID)
	}
	defer c.d.ctrlLocks.unlock(volID)

	disk, err := c.cloud().DescribeVolume(ctx, volID)
	if err != nil {
		return nil, cloudStatus(err, "volume %s", volID)
	}
	inst, err := c.cloud().DescribeInstance(ctx, nodeID)
	if err != nil {
		return nil, cloudStatus(err, "node %s", nodeID)
	}
	if a := disk.AttachmentTo(nodeID); a != nil && (a.State == AttachAttached || a.State == AttachAttaching) {
		device, err := c.waitAttached(ctx, volID, nodeID)
		if err != nil {
			return nil, err
		}
		return &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{DevicePathKey: device}}, nil
	}
	if !disk.MultiAttach {
		for _, a := range disk.Attachments {
			if a.InstanceID != nodeID && a.State != AttachDetached {
				return nil, status.Errorf(codes.FailedPrecondition, "volume %s is %s to %s; it can be attached to one node only", volID, a.State, a.InstanceID)
			}
		}
	}

	if disk.Zone != inst.Zone {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is in zone %s and node %s in zone %s: an EBS volume attaches only to instances in its own zone", volID, disk.Zone, nodeID, inst.Zone)
	}
	if err := c.attach(ctx, volID, inst); err != nil {
		return nil, err
	}
	device, err := c.waitAttached(ctx, volID, nodeID)
	if err != nil {
		return nil, err
	}
	c.d.log.Info("volume attached", "volume", volID, "node", nodeID, "device", device)
	return &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{DevicePathKey: device}}, nil
}

// attach picks a free device name on the instance and attaches the volume there,
// one attachment per instance at a time so two volumes never race for a name.
func (c *controller) attach(ctx context.Context, volID string, inst *Instance) error {
	mu := c.nodeMutex(inst.ID)
	mu.Lock()
	defer mu.Unlock()
	for attempt := 0; ; attempt++ {
		inUse := map[string]bool{}
		for dev := range inst.Devices {
			inUse[dev] = true
		}
		device, err := nextDeviceName(inUse)
		if err != nil {
			return status.Errorf(codes.ResourceExhausted, "attach %s to %s: %v", volID, inst.ID, err)
		}
		err = c.cloud().AttachVolume(ctx, volID, inst.ID, device)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrDeviceInUse) || attempt >= 3 {
			return cloudStatus(err, "attach %s to %s at %s", volID, inst.ID, device)
		}
		// Someone else took the name: look again.
		if inst, err = c.cloud().DescribeInstance(ctx, inst.ID); err != nil {
			return cloudStatus(err, "node %s", inst.ID)
		}
	}
}

func (c *controller) waitAttached(ctx context.Context, volID, nodeID string) (string, error) {
	var device string
	err := c.d.poll(ctx, "volume "+volID+" to attach to "+nodeID, func(ctx context.Context) (bool, error) {
		d, err := c.cloud().DescribeVolume(ctx, volID)
		if err != nil {
			return false, err
		}
		a := d.AttachmentTo(nodeID)
		if a == nil || a.State == AttachDetached || a.State == AttachDetaching {
			return false, fmt.Errorf("volume %s is no longer attaching to %s", volID, nodeID)
		}
		device = a.Device
		return a.State == AttachAttached, nil
	})
	if err != nil {
		return "", cloudStatus(err, "attach %s to %s", volID, nodeID)
	}
	return device, nil
}

func (c *controller) ControllerUnpublishVolume(ctx context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	volID, nodeID := req.GetVolumeId(), req.GetNodeId()
	switch {
	case volID == "":
		return nil, invalid("volume id is missing")
	case nodeID == "":
		return nil, invalid("volume %s: node id is missing", volID)
	}
	if !c.d.ctrlLocks.tryLock(volID) {
		return nil, aborted(volID)
	}
	defer c.d.ctrlLocks.unlock(volID)

	if err := c.cloud().DetachVolume(ctx, volID, nodeID); err != nil {
		if errors.Is(err, ErrNotFound) {
			return &csi.ControllerUnpublishVolumeResponse{}, nil
		}
		if !errors.Is(err, ErrIncorrectState) {
			return nil, cloudStatus(err, "detach %s from %s", volID, nodeID)
		}
		// Already detaching, or not attached: the wait below tells.
	}
	err := c.d.poll(ctx, "volume "+volID+" to detach from "+nodeID, func(ctx context.Context) (bool, error) {
		d, err := c.cloud().DescribeVolume(ctx, volID)
		if errors.Is(err, ErrNotFound) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		a := d.AttachmentTo(nodeID)
		return a == nil || a.State == AttachDetached, nil
	})
	if err != nil {
		return nil, cloudStatus(err, "detach %s from %s", volID, nodeID)
	}
	c.d.log.Info("volume detached", "volume", volID, "node", nodeID)
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

func (c *controller) ControllerExpandVolume(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, invalid("volume id is missing")
	}
	if req.GetCapacityRange() == nil {
		return nil, invalid("volume %s: capacity range is missing", id)
	}
	if req.GetCapacityRange().GetRequiredBytes() <= 0 && req.GetCapacityRange().GetLimitBytes() <= 0 {
		return nil, invalid("volume %s: capacity range names no size", id)
	}
	size, err := sizeGiB(req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes(), 1)
	if err != nil {
		return nil, status.Errorf(codes.OutOfRange, "volume %s: %v", id, err)
	}
	if !c.d.ctrlLocks.tryLock(id) {
		return nil, aborted(id)
	}
	defer c.d.ctrlLocks.unlock(id)

	nodeExpansion := req.GetVolumeCapability() == nil || !isBlock(req.GetVolumeCapability())
	disk, err := c.cloud().DescribeVolume(ctx, id)
	if err != nil {
		return nil, cloudStatus(err, "volume %s", id)
	}
	if disk.SizeGiB >= size {
		return &csi.ControllerExpandVolumeResponse{CapacityBytes: int64(disk.SizeGiB) * GiB, NodeExpansionRequired: nodeExpansion}, nil
	}
	if _, err := c.cloud().ModifyVolumeSize(ctx, id, size); err != nil {
		return nil, cloudStatus(err, "resize volume %s to %d GiB", id, size)
	}
	err = c.d.poll(ctx, "volume "+id+" to resize", func(ctx context.Context) (bool, error) {
		st, err := c.cloud().DescribeVolumeModification(ctx, id)
		if err != nil {
			return false, err
		}
		switch st {
		case ModOptimizing, ModCompleted:
			return true, nil
		case ModFailed:
			return false, fmt.Errorf("modification of %s failed", id)
		}
		return false, nil
	})
	if err != nil {
		return nil, cloudStatus(err, "resize volume %s to %d GiB", id, size)
	}
	c.d.log.Info("volume resized", "volume", id, "size_gib", size)
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: int64(size) * GiB, NodeExpansionRequired: nodeExpansion}, nil
}

func (c *controller) CreateSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	name, src := req.GetName(), req.GetSourceVolumeId()
	switch {
	case name == "":
		return nil, invalid("snapshot name is missing")
	case src == "":
		return nil, invalid("snapshot %s: source volume id is missing", name)
	}
	for k := range req.GetParameters() {
		// No snapshot parameters are defined yet; refuse rather than ignore.
		return nil, invalid("snapshot %s: parameter %q is not supported", name, k)
	}
	key := "snapshot/" + name
	if !c.d.ctrlLocks.tryLock(key) {
		return nil, aborted("snapshot " + name)
	}
	defer c.d.ctrlLocks.unlock(key)

	existing, err := c.cloud().FindSnapshotsByName(ctx, name)
	if err != nil {
		return nil, cloudStatus(err, "snapshot %s: look up by name", name)
	}
	if len(existing) > 0 {
		s := existing[0]
		if s.VolumeID != src {
			return nil, status.Errorf(codes.AlreadyExists, "snapshot %s exists as %s of volume %s, not %s", name, s.ID, s.VolumeID, src)
		}
		return &csi.CreateSnapshotResponse{Snapshot: snapshotInfo(s)}, nil
	}
	if _, err := c.cloud().DescribeVolume(ctx, src); err != nil {
		return nil, cloudStatus(err, "snapshot %s: source volume %s", name, src)
	}
	tags := map[string]string{}
	for k, v := range c.d.cfg.ExtraTags {
		tags[k] = v
	}
	tags[TagSnapshotName] = name
	tags[TagCluster] = "true"
	s, err := c.cloud().CreateSnapshot(ctx, CreateSnapshotInput{
		VolumeID: src, Description: "Created by the kubelab EBS CSI driver for " + name, Tags: tags,
	})
	if err != nil {
		return nil, cloudStatus(err, "create snapshot %s of %s", name, src)
	}
	c.d.log.Info("snapshot created", "name", name, "snapshot", s.ID, "volume", src)
	return &csi.CreateSnapshotResponse{Snapshot: snapshotInfo(s)}, nil
}

func snapshotInfo(s *Snapshot) *csi.Snapshot {
	out := &csi.Snapshot{
		SnapshotId:     s.ID,
		SourceVolumeId: s.VolumeID,
		SizeBytes:      int64(s.SizeGiB) * GiB,
		ReadyToUse:     s.State == SnapshotCompleted,
	}
	if !s.CreationTime.IsZero() {
		out.CreationTime = timestamppb.New(s.CreationTime)
	}
	return out
}

func (c *controller) DeleteSnapshot(ctx context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	id := req.GetSnapshotId()
	unlock, err := c.lockID("snapshot", id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	err = c.cloud().DeleteSnapshot(ctx, id)
	if errors.Is(err, ErrIncorrectState) {
		// A snapshot still being taken cannot be deleted: wait for it to settle.
		werr := c.d.poll(ctx, "snapshot "+id+" to complete", func(ctx context.Context) (bool, error) {
			s, err := c.cloud().DescribeSnapshot(ctx, id)
			if err != nil {
				return false, err
			}
			return s.State != SnapshotPending, nil
		})
		if werr != nil && !errors.Is(werr, ErrNotFound) {
			return nil, cloudStatus(werr, "delete snapshot %s", id)
		}
		err = c.cloud().DeleteSnapshot(ctx, id)
	}
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, cloudStatus(err, "delete snapshot %s", id)
	}
	return &csi.DeleteSnapshotResponse{}, nil
}

// listToken is the CSI starting token of ListSnapshots: the cloud's token of a page
// and how many entries of that page were already returned, so that any max_entries
// works over the cloud's pages.
type listToken struct {
	Cloud string `json:"c,omitempty"`
	Skip  int    `json:"s,omitempty"`
}

func (t listToken) encode() string {
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeListToken(s string) (listToken, error) {
	var t listToken
	if s == "" {
		return t, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return t, fmt.Errorf("starting token %q is not one this driver made", s)
	}
	if err := json.Unmarshal(b, &t); err != nil || t.Skip < 0 {
		return t, fmt.Errorf("starting token %q is not one this driver made", s)
	}
	return t, nil
}

// minCloudPage is the smallest page EC2 DescribeSnapshots serves.
const minCloudPage = 5

func (c *controller) ListSnapshots(ctx context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	if req.GetMaxEntries() < 0 {
		return nil, invalid("max_entries %d is negative", req.GetMaxEntries())
	}
	if id := req.GetSnapshotId(); id != "" {
		s, err := c.cloud().DescribeSnapshot(ctx, id)
		if errors.Is(err, ErrNotFound) {
			return &csi.ListSnapshotsResponse{}, nil
		}
		if err != nil {
			return nil, cloudStatus(err, "snapshot %s", id)
		}
		if v := req.GetSourceVolumeId(); v != "" && s.VolumeID != v {
			return &csi.ListSnapshotsResponse{}, nil
		}
		return &csi.ListSnapshotsResponse{Entries: []*csi.ListSnapshotsResponse_Entry{{Snapshot: snapshotInfo(s)}}}, nil
	}
	tok, err := decodeListToken(req.GetStartingToken())
	if err != nil {
		return nil, status.Error(codes.Aborted, err.Error())
	}
	max := int(req.GetMaxEntries())
	var page int32
	if max > 0 {
		page = int32(max + tok.Skip)
		if page < minCloudPage {
			page = minCloudPage
		}
	}
	var entries []*csi.ListSnapshotsResponse_Entry
	cloudTok, skip := tok.Cloud, tok.Skip
	for {
		snaps, next, err := c.cloud().ListSnapshots(ctx, req.GetSourceVolumeId(), page, cloudTok)
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				return &csi.ListSnapshotsResponse{}, nil
			}
			if errors.Is(err, ErrInvalidParameter) && cloudTok != "" {
				return nil, status.Errorf(codes.Aborted, "starting token is no longer valid: %v", err)
			}
			return nil, cloudStatus(err, "list snapshots")
		}
		if skip > len(snaps) {
			return nil, status.Errorf(codes.Aborted, "starting token points past the end of the list")
		}
		for i := skip; i < len(snaps); i++ {
			if max > 0 && len(entries) == max {
				// The page is full: the next call resumes inside this cloud page.
				return &csi.ListSnapshotsResponse{Entries: entries, NextToken: listToken{Cloud: cloudTok, Skip: i}.encode()}, nil
			}
			entries = append(entries, &csi.ListSnapshotsResponse_Entry{Snapshot: snapshotInfo(snaps[i])})
		}
		skip = 0
		if next == "" {
			return &csi.ListSnapshotsResponse{Entries: entries}, nil
		}
		cloudTok = next
		if max > 0 && len(entries) == max {
			return &csi.ListSnapshotsResponse{Entries: entries, NextToken: listToken{Cloud: cloudTok}.encode()}, nil
		}
	}
}
