package driver

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
)

// publishedVolume creates a 1 GiB volume in the node's zone and attaches it there.
func (e *hollowEnv) publishedVolume(t *testing.T, name string, vc *csi.VolumeCapability) (string, map[string]string) {
	t.Helper()
	ctx := context.Background()
	vol, err := e.ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: []*csi.VolumeCapability{vc},
		CapacityRange:             &csi.CapacityRange{RequiredBytes: GiB},
		AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{topo("us-east-1b")}}})
	if err != nil {
		t.Fatal(err)
	}
	id := vol.GetVolume().GetVolumeId()
	pub, err := e.ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: e.node, VolumeCapability: vc})
	if err != nil {
		t.Fatal(err)
	}
	return id, pub.GetPublishContext()
}

func TestNodeGetInfo(t *testing.T) {
	e := newHollowEnv(t, "us-east-1b")
	info, err := e.nodeC.NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetNodeId() != e.node || info.GetMaxVolumesPerNode() != 26 ||
		info.GetAccessibleTopology().GetSegments()[TopologyKeyZone] != "us-east-1b" ||
		info.GetAccessibleTopology().GetSegments()[TopologyKeyWellKnown] != "us-east-1b" {
		t.Fatalf("node info %v", info)
	}
}

func TestNodeStagePublishLifecycleHollow(t *testing.T) {
	e := newHollowEnv(t, "us-east-1b")
	ctx := context.Background()
	vc := mountCap("xfs")
	id, pc := e.publishedVolume(t, "life", vc)
	root := shortDir(t)
	staging := filepath.Join(root, "plugins", "kubernetes.io", "csi", "pv", "life", "globalmount")
	target := filepath.Join(root, "pods", "uid", "volumes", "kubernetes.io~csi", "life", "mount")

	_, err := e.nodeC.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: vc})
	wantCode(t, err, codes.InvalidArgument, "stage without devicePath")
	_, err = e.nodeC.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: vc,
		PublishContext: pc, VolumeContext: map[string]string{"bytesperinode": "4096"}})
	wantCode(t, err, codes.InvalidArgument, "xfs with bytesperinode")

	for i := 0; i < 2; i++ {
		if _, err := e.nodeC.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: vc, PublishContext: pc}); err != nil {
			t.Fatalf("stage %d: %v", i, err)
		}
	}
	if e.mounter.Formats != 1 {
		t.Fatalf("formatted %d times, want once", e.mounter.Formats)
	}
	// A second stage asking for ext4 on the xfs volume, elsewhere: refused.
	_, err = e.nodeC.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging + "2", VolumeCapability: mountCap("ext4"), PublishContext: pc})
	wantCode(t, err, codes.FailedPrecondition, "stage ext4 over xfs")

	_, err = e.nodeC.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, VolumeCapability: vc, PublishContext: pc})
	wantCode(t, err, codes.InvalidArgument, "publish without staging path")
	for i := 0; i < 2; i++ {
		if _, err := e.nodeC.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, StagingTargetPath: staging,
			VolumeCapability: vc, PublishContext: pc, Readonly: true}); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	opts, ok := e.mounter.Options(target)
	if !ok || !slices.Contains(opts, "bind") || !slices.Contains(opts, "ro") {
		t.Fatalf("target mounted %v with %v, want a read-only bind", ok, opts)
	}
	st, err := e.nodeC.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target})
	if err != nil || len(st.GetUsage()) != 2 || st.GetUsage()[0].GetTotal() <= 0 {
		t.Fatalf("stats %v, %v", st, err)
	}
	_, err = e.nodeC.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target + "-nope"})
	wantCode(t, err, codes.NotFound, "stats of a missing path")
	if _, err := e.nodeC.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: target}); err != nil {
		t.Fatalf("expand: %v", err)
	}
	_, err = e.nodeC.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: "some/path"})
	wantCode(t, err, codes.NotFound, "expand of a missing path")

	for i := 0; i < 2; i++ {
		if _, err := e.nodeC.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
			t.Fatalf("unpublish %d: %v", i, err)
		}
		if _, err := e.nodeC.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
			t.Fatalf("unstage %d: %v", i, err)
		}
	}
	for _, p := range []string{target, staging} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s still exists (%v)", p, err)
		}
	}
	if n := e.mounter.Mounts(); n != 0 {
		t.Fatalf("%d mounts left", n)
	}

	// Metrics: every call counted, errors apart.
	reg := e.d.Registry()
	if n := testutil.ToFloat64(e.d.metrics.calls.WithLabelValues(DriverName, "NodeStageVolume", "OK")); n != 2 {
		t.Fatalf("NodeStageVolume OK count %v, want 2", n)
	}
	if n := testutil.ToFloat64(e.d.metrics.errors.WithLabelValues(DriverName, "NodeStageVolume", "InvalidArgument")); n != 2 {
		t.Fatalf("NodeStageVolume InvalidArgument errors %v, want 2", n)
	}
	if n, err := testutil.GatherAndCount(reg, "kubelab_csi_operation_duration_seconds"); err != nil || n == 0 {
		t.Fatalf("latency histogram: %d series, %v", n, err)
	}
}

func TestNodeBlockVolumeHollow(t *testing.T) {
	e := newHollowEnv(t, "us-east-1b")
	ctx := context.Background()
	vc := blockCap()
	id, pc := e.publishedVolume(t, "raw", vc)
	root := shortDir(t)
	staging := filepath.Join(root, "staging")
	target := filepath.Join(root, "pods", "dev", id)
	if _, err := e.nodeC.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: vc, PublishContext: pc}); err != nil {
		t.Fatal(err)
	}
	if e.mounter.Formats != 0 || e.mounter.Mounts() != 0 {
		t.Fatal("a block volume was formatted or mounted at stage")
	}
	if _, err := e.nodeC.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, StagingTargetPath: staging, VolumeCapability: vc, PublishContext: pc}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(target)
	if err != nil || st.IsDir() {
		t.Fatalf("block target %v, %v: want a file", st, err)
	}
	dev, err := e.mounter.DeviceOf(target)
	if err != nil || !strings.Contains(dev, strings.ReplaceAll(id, "-", "")) && !strings.HasSuffix(dev, "xvdba") && !strings.Contains(dev, id) {
		t.Fatalf("block target bound to %q, %v", dev, err)
	}
	stats, err := e.nodeC.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target})
	if err != nil || stats.GetUsage()[0].GetTotal() != GiB {
		t.Fatalf("block stats %v, %v; want 1 GiB", stats, err)
	}
	if _, err := e.nodeC.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("block target not removed: %v", err)
	}
}

func TestNodeStageMissingDevice(t *testing.T) {
	e := newHollowEnv(t, "us-east-1b")
	// Not hollow devices: nothing at the device dir means NotFound.
	e.d.deps.Devices = DeviceDir{Dir: e.devDir}
	_, err := e.nodeC.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{VolumeId: "vol-0abc", StagingTargetPath: filepath.Join(shortDir(t), "s"),
		VolumeCapability: mountCap(""), PublishContext: map[string]string{"devicePath": "/dev/xvdzz"}})
	wantCode(t, err, codes.NotFound, "stage without a device")
}
