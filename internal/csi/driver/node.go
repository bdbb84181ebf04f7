package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// node is the CSI Node service: it finds the device of an attached volume, makes a
// filesystem when it is blank, mounts it at the staging path, bind-mounts it into
// pods, grows it and reports its usage.
type node struct {
	csi.UnimplementedNodeServer
	d *Driver
}

func (n *node) mounter() Mounter { return n.d.deps.Mounter }
func (n *node) devices() Devices { return n.d.deps.Devices }

func (n *node) lock(volID string) error {
	if !n.d.nodeInflight.tryLock(volID) {
		return aborted(volID)
	}
	return nil
}

func (n *node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	var caps []*csi.NodeServiceCapability
	for _, t := range []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
	} {
		caps = append(caps, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{
			Rpc: &csi.NodeServiceCapability_RPC{Type: t},
		}})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

func (n *node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	id := n.d.identity
	return &csi.NodeGetInfoResponse{
		NodeId:             id.InstanceID,
		MaxVolumesPerNode:  maxVolumesPerNode(id.InstanceType, n.d.cfg.VolumeAttachLimit, n.d.cfg.ReservedAttachments),
		AccessibleTopology: zoneTopology(id.Zone),
	}, nil
}

func (n *node) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	volID, staging, vc := req.GetVolumeId(), req.GetStagingTargetPath(), req.GetVolumeCapability()
	if err := checkVolumePath(volID, staging, "staging target"); err != nil {
		return nil, err
	}
	if err := checkVolumeCapability(volID, vc); err != nil {
		return nil, err
	}
	if isBlock(vc) {
		// A raw block volume is published straight from its device.
		return &csi.NodeStageVolumeResponse{}, nil
	}
	fsType := vc.GetMount().GetFsType()
	if fsType == "" {
		fsType = "ext4"
	}
	formatOpts, err := mkfsOptions(fsType, req.GetVolumeContext())
	if err != nil {
		return nil, invalid("volume %s: %v", volID, err)
	}
	devicePath := req.GetPublishContext()[DevicePathKey]
	if devicePath == "" {
		return nil, invalid("volume %s: publish context has no %s", volID, DevicePathKey)
	}
	if err := n.lock(volID); err != nil {
		return nil, err
	}
	defer n.d.nodeInflight.unlock(volID)

	source, err := n.devices().Resolve(devicePath, volID)
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "volume %s: %v", volID, err)
	}
	mounted, err := n.mounter().IsMountPoint(staging)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(staging, 0o750); err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s: make staging path: %v", volID, err)
		}
	case err != nil:
		return nil, status.Errorf(codes.Internal, "volume %s: check staging path %s: %v", volID, staging, err)
	}
	if mounted {
		dev, err := n.mounter().DeviceOf(staging)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s: device at %s: %v", volID, staging, err)
		}
		if !sameFile(dev, source) {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s: staging path %s already holds %s, not %s", volID, staging, dev, source)
		}
		return &csi.NodeStageVolumeResponse{}, nil
	}

	existing, err := n.mounter().GetDiskFormat(source)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: read format of %s: %v", volID, source, err)
	}
	if existing != "" && existing != fsType {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s: device %s holds %s, not the requested %s", volID, source, existing, fsType)
	}
	grown := false
	if isExt(existing) {
		// A volume that grew while it was not staged (resized offline, restored
		// from a smaller snapshot) is grown before it is mounted: offline growth
		// needs no privilege beyond the device, unlike ext4's online resize.
		need, err := n.mounter().NeedResize(source, staging)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s: check size of %s: %v", volID, source, err)
		}
		if need {
			if err := n.mounter().GrowUnmounted(source); err != nil {
				return nil, status.Errorf(codes.Internal, "volume %s: grow filesystem on %s: %v", volID, source, err)
			}
			grown = true
		}
	}
	opts := append([]string(nil), vc.GetMount().GetMountFlags()...)
	if err := n.mounter().FormatAndMount(source, staging, fsType, opts, formatOpts); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: format and mount %s at %s: %v", volID, source, staging, err)
	}
	if existing != "" && !isExt(existing) {
		// A volume that had a filesystem may have grown since (restored from a
		// smaller snapshot, resized while detached).
		need, err := n.mounter().NeedResize(source, staging)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s: check size of %s: %v", volID, source, err)
		}
		if need {
			if _, err := n.mounter().Resize(source, staging); err != nil {
				return nil, status.Errorf(codes.Internal, "volume %s: grow filesystem on %s: %v", volID, source, err)
			}
		}
	}
	n.d.log.Info("volume staged", "volume", volID, "device", source, "fs", fsType, "path", staging, "formatted", existing == "", "grown", grown)
	return &csi.NodeStageVolumeResponse{}, nil
}

func isExt(fs string) bool { return fs == "ext2" || fs == "ext3" || fs == "ext4" }

func sameFile(a, b string) bool {
	if a == b {
		return true
	}
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}

// unmountAndRemove unmounts path until it is no mount point, then removes it.
// A missing path is fine.
func (n *node) unmountAndRemove(path string) error {
	for i := 0; i < 8; i++ {
		mounted, err := n.mounter().IsMountPoint(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("check %s: %w", path, err)
		}
		if !mounted {
			break
		}
		if err := n.mounter().Unmount(path); err != nil {
			return fmt.Errorf("unmount %s: %w", path, err)
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

func (n *node) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	if err := n.undoMount(req.GetVolumeId(), req.GetStagingTargetPath(), "staging target", "unstage", "volume unstaged", "path"); err != nil {
		return nil, err
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// undoMount checks the request of NodeUnstageVolume or NodeUnpublishVolume, then, under the
// volume's lock, unmounts and removes path. pathName names the path in the error when it
// is missing, op the step in the error when it fails; logMsg and logKey log the success.
func (n *node) undoMount(volID, path, pathName, op, logMsg, logKey string) error {
	if err := checkVolumePath(volID, path, pathName); err != nil {
		return err
	}
	if err := n.lock(volID); err != nil {
		return err
	}
	defer n.d.nodeInflight.unlock(volID)
	if err := n.unmountAndRemove(path); err != nil {
		return status.Errorf(codes.Internal, "volume %s: %s: %v", volID, op, err)
	}
	n.d.log.Info(logMsg, "volume", volID, logKey, path)
	return nil
}

func (n *node) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	volID, target, staging, vc := req.GetVolumeId(), req.GetTargetPath(), req.GetStagingTargetPath(), req.GetVolumeCapability()
	if err := checkVolumePath(volID, target, "target"); err != nil {
		return nil, err
	}
	if err := checkVolumeCapability(volID, vc); err != nil {
		return nil, err
	}
	if !isBlock(vc) && staging == "" {
		return nil, invalid("volume %s: staging target path is missing", volID)
	}
	if err := n.lock(volID); err != nil {
		return nil, err
	}
	defer n.d.nodeInflight.unlock(volID)

	opts := []string{"bind"}
	if req.GetReadonly() || vc.GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY {
		opts = append(opts, "ro")
	}
	var source, fsType string
	if isBlock(vc) {
		devicePath := req.GetPublishContext()[DevicePathKey]
		if devicePath == "" {
			return nil, invalid("volume %s: publish context has no %s", volID, DevicePathKey)
		}
		dev, err := n.devices().Resolve(devicePath, volID)
		if err != nil {
			return nil, status.Errorf(codes.NotFound, "volume %s: %v", volID, err)
		}
		source = dev
	} else {
		mounted, err := n.mounter().IsMountPoint(staging)
		if err != nil || !mounted {
			return nil, status.Errorf(codes.FailedPrecondition, "volume %s: staging path %s is not mounted; stage the volume first", volID, staging)
		}
		source = staging
		fsType = vc.GetMount().GetFsType()
		opts = append(opts, vc.GetMount().GetMountFlags()...)
	}

	mounted, err := n.mounter().IsMountPoint(target)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := makeTarget(target, isBlock(vc)); err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s: %v", volID, err)
		}
	case err != nil:
		return nil, status.Errorf(codes.Internal, "volume %s: check target %s: %v", volID, target, err)
	}
	if mounted {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if err := n.mounter().Mount(source, target, fsType, opts); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: bind %s at %s: %v", volID, source, target, err)
	}
	n.d.log.Info("volume published", "volume", volID, "target", target, "readonly", slices.Contains(opts, "ro"), "block", isBlock(vc))
	return &csi.NodePublishVolumeResponse{}, nil
}

// checkVolumePath checks that a node call names its volume and its path; pathName names
// the path in the error ("staging target", "target", "volume").
func checkVolumePath(volID, path, pathName string) error {
	switch {
	case volID == "":
		return invalid("volume id is missing")
	case path == "":
		return invalid("volume %s: %s path is missing", volID, pathName)
	}
	return nil
}

// checkVolumeCapability checks that a node call carries a volume capability this driver
// supports.
func checkVolumeCapability(volID string, vc *csi.VolumeCapability) error {
	if vc == nil {
		return invalid("volume %s: volume capability is missing", volID)
	}
	if err := checkCapability(vc); err != nil {
		return invalid("volume %s: %v", volID, err)
	}
	return nil
}

// makeTarget makes the publish target: a directory for a filesystem, a file to
// bind the device onto for a raw block volume.
func makeTarget(target string, block bool) error {
	if !block {
		if err := os.MkdirAll(target, 0o750); err != nil {
			return fmt.Errorf("make target %s: %w", target, err)
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return fmt.Errorf("make target dir of %s: %w", target, err)
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_RDWR, 0o640)
	if err != nil {
		return fmt.Errorf("make target %s: %w", target, err)
	}
	return f.Close()
}

func (n *node) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if err := n.undoMount(req.GetVolumeId(), req.GetTargetPath(), "target", "unpublish", "volume unpublished", "target"); err != nil {
		return nil, err
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

func (n *node) NodeGetVolumeStats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	volID, path := req.GetVolumeId(), req.GetVolumePath()
	if err := checkVolumePath(volID, path, "volume"); err != nil {
		return nil, err
	}
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.NotFound, "volume %s: path %s does not exist", volID, path)
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: stat %s: %v", volID, path, err)
	}
	if !st.IsDir() {
		size, err := n.blockSize(path)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s: %v", volID, err)
		}
		return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{{Unit: csi.VolumeUsage_BYTES, Total: size}}}, nil
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: statfs %s: %v", volID, path, err)
	}
	bs := int64(fs.Bsize)
	return &csi.NodeGetVolumeStatsResponse{
		Usage: []*csi.VolumeUsage{
			{Unit: csi.VolumeUsage_BYTES, Total: int64(fs.Blocks) * bs, Available: int64(fs.Bavail) * bs, Used: int64(fs.Blocks-fs.Bfree) * bs},
			{Unit: csi.VolumeUsage_INODES, Total: int64(fs.Files), Available: int64(fs.Ffree), Used: int64(fs.Files - fs.Ffree)},
		},
	}, nil
}

// blockSize is the size of the device behind a raw block publish target.
func (n *node) blockSize(path string) (int64, error) {
	dev := path
	if mounted, err := n.mounter().IsMountPoint(path); err == nil && mounted {
		if d, err := n.mounter().DeviceOf(path); err == nil {
			dev = d
		}
	}
	size, err := n.devices().Size(dev)
	if err != nil {
		return 0, fmt.Errorf("size of block volume at %s: %w", path, err)
	}
	return size, nil
}

func (n *node) NodeExpandVolume(ctx context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	volID, path := req.GetVolumeId(), req.GetVolumePath()
	if err := checkVolumePath(volID, path, "volume"); err != nil {
		return nil, err
	}
	if vc := req.GetVolumeCapability(); vc != nil {
		if err := checkCapability(vc); err != nil {
			return nil, invalid("volume %s: %v", volID, err)
		}
	}
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.NotFound, "volume %s: path %s does not exist", volID, path)
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: stat %s: %v", volID, path, err)
	}
	if err := n.lock(volID); err != nil {
		return nil, err
	}
	defer n.d.nodeInflight.unlock(volID)
	if isBlock(req.GetVolumeCapability()) || !st.IsDir() {
		// A raw block device grows by itself; there is no filesystem to grow.
		size, err := n.blockSize(path)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s: %v", volID, err)
		}
		return &csi.NodeExpandVolumeResponse{CapacityBytes: size}, nil
	}
	mounted, err := n.mounter().IsMountPoint(path)
	if err != nil || !mounted {
		return nil, status.Errorf(codes.NotFound, "volume %s: nothing is mounted at %s", volID, path)
	}
	dev, err := n.mounter().DeviceOf(path)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: device at %s: %v", volID, path, err)
	}
	need, err := n.mounter().NeedResize(dev, path)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: check size of %s: %v", volID, dev, err)
	}
	if need {
		if _, err := n.mounter().Resize(dev, path); err != nil {
			if strings.Contains(err.Error(), "Permission denied to resize") {
				// ext4 online resize needs CAP_SYS_RESOURCE, which some nodes (and
				// containers) lack; offline growth at the next stage still works.
				return nil, status.Errorf(codes.FailedPrecondition, "volume %s: this node may not grow a mounted ext4 filesystem (no CAP_SYS_RESOURCE): unpublish and unstage the volume and it grows at the next NodeStageVolume: %v", volID, err)
			}
			return nil, status.Errorf(codes.Internal, "volume %s: grow filesystem on %s: %v", volID, dev, err)
		}
	}
	size, err := n.devices().Size(dev)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", volID, err)
	}
	if req.GetCapacityRange().GetRequiredBytes() > 0 && size > 0 && size < req.GetCapacityRange().GetRequiredBytes() {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s: device %s has %d bytes, less than the %d asked; the controller resize has not reached the node", volID, dev, size, req.GetCapacityRange().GetRequiredBytes())
	}
	n.d.log.Info("volume expanded", "volume", volID, "device", dev, "bytes", size)
	return &csi.NodeExpandVolumeResponse{CapacityBytes: size}, nil
}
