package pluginmanager

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	csiclient "github.com/kubelab/kubelab/internal/csi/client"
	"github.com/kubelab/kubelab/internal/kubelet"
	"github.com/kubelab/kubelab/internal/util/volumeutil"
)

// csiCallTimeout bounds each node call to a driver.
const csiCallTimeout = 2 * time.Minute

// CSIMounter stages, publishes and expands CSI volumes through the node service of the
// volume's registered driver.
type CSIMounter struct {
	m *Manager
}

var _ kubelet.Mounter = (*CSIMounter)(nil)

// NewCSIMounter returns the mounter that calls the drivers m registered.
func NewCSIMounter(m *Manager) *CSIMounter { return &CSIMounter{m: m} }

// Stage writes vol_data.json beside the staging path and, when the driver stages
// volumes, calls NodeStageVolume.
func (c *CSIMounter) Stage(ctx context.Context, v *kubelet.Volume, stagingPath string) error {
	d, conn, err := c.m.driver(v.Driver)
	if err != nil {
		return err
	}
	vc, err := volumeCapability(v)
	if err != nil {
		return err
	}
	dir := filepath.Dir(stagingPath)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("stage volume %s: %w", v.Handle, err)
	}
	if err := writeVolumeData(dir, VolumeData{VolumeHandle: v.Handle, DriverName: v.Driver}); err != nil {
		return fmt.Errorf("stage volume %s: %w", v.Handle, err)
	}
	if !d.caps[csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, csiCallTimeout)
	defer cancel()
	_, err = csi.NewNodeClient(conn).NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
		VolumeId: v.Handle, PublishContext: v.PublishContext, StagingTargetPath: stagingPath,
		VolumeCapability: vc, VolumeContext: v.VolumeContext,
	})
	if err != nil {
		if csiclient.IsFinal(err) {
			// The driver did not stage it: nothing for a later unstage to find.
			_ = removeMountDir(stagingPath)
		}
		return callError("NodeStageVolume", v, stagingPath, err)
	}
	c.m.log.Debug("volume staged", "driver", v.Driver, "volume", v.Handle, "pv", v.PVName, "path", stagingPath)
	return nil
}

// Publish writes vol_data.json beside the target path and calls NodePublishVolume.
func (c *CSIMounter) Publish(ctx context.Context, v *kubelet.Volume, stagingPath, targetPath string) error {
	d, conn, err := c.m.driver(v.Driver)
	if err != nil {
		return err
	}
	vc, err := volumeCapability(v)
	if err != nil {
		return err
	}
	dir := filepath.Dir(targetPath)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("publish volume %s: %w", v.Handle, err)
	}
	node := c.m.cfg.NodeName
	if err := writeVolumeData(dir, VolumeData{SpecVolID: v.PVName, VolumeHandle: v.Handle, DriverName: v.Driver, NodeName: node,
		AttachmentID: volumeutil.AttachmentName(v.Handle, v.Driver, node), VolumeLifecycleMode: LifecyclePersistent}); err != nil {
		return fmt.Errorf("publish volume %s: %w", v.Handle, err)
	}
	req := &csi.NodePublishVolumeRequest{
		VolumeId: v.Handle, PublishContext: v.PublishContext, TargetPath: targetPath,
		VolumeCapability: vc, Readonly: v.ReadOnly, VolumeContext: v.VolumeContext,
	}
	if d.caps[csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
		req.StagingTargetPath = stagingPath
	}
	ctx, cancel := context.WithTimeout(ctx, csiCallTimeout)
	defer cancel()
	if _, err := csi.NewNodeClient(conn).NodePublishVolume(ctx, req); err != nil {
		if csiclient.IsFinal(err) {
			// The driver did not publish it: nothing for a later unpublish to find.
			_ = removeMountDir(targetPath)
		}
		return callError("NodePublishVolume", v, targetPath, err)
	}
	c.m.log.Debug("volume published", "driver", v.Driver, "volume", v.Handle, "pv", v.PVName, "target", targetPath)
	return nil
}

// Unpublish calls NodeUnpublishVolume, then removes the target path and its
// vol_data.json.
func (c *CSIMounter) Unpublish(ctx context.Context, v *kubelet.Volume, targetPath string) error {
	v = withVolumeData(v, filepath.Dir(targetPath))
	_, conn, err := c.m.driver(v.Driver)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, csiCallTimeout)
	defer cancel()
	if _, err := csi.NewNodeClient(conn).NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: v.Handle, TargetPath: targetPath}); err != nil {
		return callError("NodeUnpublishVolume", v, targetPath, err)
	}
	if err := removeMountDir(targetPath); err != nil {
		return fmt.Errorf("unpublish volume %s at %s: %w", v.Handle, targetPath, err)
	}
	c.m.log.Debug("volume unpublished", "driver", v.Driver, "volume", v.Handle, "pv", v.PVName, "target", targetPath)
	return nil
}

// Unstage calls NodeUnstageVolume when the driver stages volumes, then removes the
// staging path and its vol_data.json.
func (c *CSIMounter) Unstage(ctx context.Context, v *kubelet.Volume, stagingPath string) error {
	v = withVolumeData(v, filepath.Dir(stagingPath))
	d, conn, err := c.m.driver(v.Driver)
	if err != nil {
		return err
	}
	if d.caps[csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
		ctx, cancel := context.WithTimeout(ctx, csiCallTimeout)
		defer cancel()
		if _, err := csi.NewNodeClient(conn).NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: v.Handle, StagingTargetPath: stagingPath}); err != nil {
			return callError("NodeUnstageVolume", v, stagingPath, err)
		}
	}
	if err := removeMountDir(stagingPath); err != nil {
		return fmt.Errorf("unstage volume %s at %s: %w", v.Handle, stagingPath, err)
	}
	c.m.log.Debug("volume unstaged", "driver", v.Driver, "volume", v.Handle, "pv", v.PVName, "path", stagingPath)
	return nil
}

// Expand calls NodeExpandVolume for the published volume. A driver without
// EXPAND_VOLUME has nothing to grow on the node: that is success.
func (c *CSIMounter) Expand(ctx context.Context, v *kubelet.Volume, stagingPath, targetPath string, size resource.Quantity) error {
	d, conn, err := c.m.driver(v.Driver)
	if err != nil {
		return err
	}
	if !d.caps[csi.NodeServiceCapability_RPC_EXPAND_VOLUME] {
		return nil
	}
	vc, err := volumeCapability(v)
	if err != nil {
		return err
	}
	req := &csi.NodeExpandVolumeRequest{
		VolumeId: v.Handle, VolumePath: targetPath, CapacityRange: &csi.CapacityRange{RequiredBytes: size.Value()},
		VolumeCapability: vc,
	}
	if d.caps[csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
		req.StagingTargetPath = stagingPath
	}
	ctx, cancel := context.WithTimeout(ctx, csiCallTimeout)
	defer cancel()
	resp, err := csi.NewNodeClient(conn).NodeExpandVolume(ctx, req)
	if err != nil {
		return callError("NodeExpandVolume", v, targetPath, err)
	}
	c.m.log.Debug("volume expanded", "driver", v.Driver, "volume", v.Handle, "pv", v.PVName, "bytes", resp.GetCapacityBytes())
	return nil
}

// volumeCapability is the mount capability of v: its filesystem and the CSI form of its
// access mode (ReadWriteOnce when it has none).
func volumeCapability(v *kubelet.Volume) (*csi.VolumeCapability, error) {
	mode := v.AccessMode
	if mode == "" {
		mode = corev1.ReadWriteOnce
	}
	am, err := csiclient.AccessMode(mode)
	if err != nil {
		return nil, fmt.Errorf("volume %s: %w", v.Handle, err)
	}
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: v.FSType}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: am},
	}, nil
}

// withVolumeData fills a volume's missing driver and handle from the vol_data.json in
// dir (a kubelet that restarted may know only the path).
func withVolumeData(v *kubelet.Volume, dir string) *kubelet.Volume {
	if v.Driver != "" && v.Handle != "" {
		return v
	}
	d, err := ReadVolumeData(dir)
	if err != nil {
		return v
	}
	out := *v
	if out.Driver == "" {
		out.Driver = d.DriverName
	}
	if out.Handle == "" {
		out.Handle = d.VolumeHandle
	}
	return &out
}

// callError names the call, volume and path of a driver's error; the gRPC status stays
// reachable through the chain.
func callError(call string, v *kubelet.Volume, path string, err error) error {
	return fmt.Errorf("%s of volume %s (pv %s) at %s: %w", call, v.Handle, v.PVName, path, err)
}
