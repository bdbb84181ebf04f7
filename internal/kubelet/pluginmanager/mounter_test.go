package pluginmanager

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubelab/kubelab/internal/kubelet"
	"github.com/kubelab/kubelab/internal/util/volumeutil"
)

// registeredEnv is a manager with the fake driver registered through the real registrar.
func registeredEnv(t *testing.T, caps ...csi.NodeServiceCapability_RPC_Type) (*env, *fakeCSI) {
	t.Helper()
	e := newEnv(t, true)
	f := newFakeCSI("i-0aaa", caps...)
	sock := e.csiSock("csi.sock")
	f.serve(t, sock)
	startRegistrar(t, e, sock)
	waitRegistered(t, e)
	return e, f
}

func (e *env) paths(pv string) (staging, target string) {
	return filepath.Join(e.root, "plugins", "kubernetes.io", "csi", "pv", pv, "globalmount"),
		filepath.Join(e.root, "pods", "pod-uid-1", "volumes", "kubernetes.io~csi", pv, "mount")
}

func testVolume(pv, handle string) *kubelet.Volume {
	return &kubelet.Volume{
		UniqueName: "kubernetes.io/csi/" + testDriver + "^" + handle, PVName: pv, Claim: "default/data",
		Driver: testDriver, Handle: handle, FSType: "xfs", ReadOnly: true, AccessMode: corev1.ReadWriteOnce,
		VolumeContext:  map[string]string{"partition": "0"},
		PublishContext: map[string]string{"devicePath": "/dev/xvdba"},
	}
}

func mountCapability(fs string, mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fs}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

// lastCall returns the only recorded request of its kind.
func lastCall[T proto.Message](t *testing.T, f *fakeCSI) T {
	t.Helper()
	calls := callsOf[T](f)
	if len(calls) != 1 {
		var zero T
		t.Fatalf("%d %T calls, want 1", len(calls), zero)
	}
	return calls[0]
}

func checkRequest(t *testing.T, got, want proto.Message) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Errorf("request\n got %v\nwant %v", got, want)
	}
}

func readData(t *testing.T, dir string) VolumeData {
	t.Helper()
	d, err := ReadVolumeData(dir)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func gone(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there (%v)", p, err)
		}
	}
}

// TestCSIMounter: stage, publish, expand, unpublish and unstage reach the driver with the
// volume's capability, paths and contexts; vol_data.json is written beside the mount
// points and removed with them.
func TestCSIMounter(t *testing.T) {
	e, f := registeredEnv(t, csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME, csi.NodeServiceCapability_RPC_EXPAND_VOLUME)
	mnt := NewCSIMounter(e.m)
	ctx := context.Background()
	v := testVolume("pv-1", "vol-1")
	staging, target := e.paths("pv-1")
	vc := mountCapability("xfs", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)

	if err := mnt.Stage(ctx, v, staging); err != nil {
		t.Fatal(err)
	}
	checkRequest(t, lastCall[*csi.NodeStageVolumeRequest](t, f), &csi.NodeStageVolumeRequest{
		VolumeId: "vol-1", PublishContext: v.PublishContext, StagingTargetPath: staging, VolumeCapability: vc, VolumeContext: v.VolumeContext})
	if d := readData(t, filepath.Dir(staging)); d != (VolumeData{VolumeHandle: "vol-1", DriverName: testDriver}) {
		t.Errorf("staging vol_data.json = %+v", d)
	}

	if err := mnt.Publish(ctx, v, staging, target); err != nil {
		t.Fatal(err)
	}
	checkRequest(t, lastCall[*csi.NodePublishVolumeRequest](t, f), &csi.NodePublishVolumeRequest{
		VolumeId: "vol-1", PublishContext: v.PublishContext, StagingTargetPath: staging, TargetPath: target,
		VolumeCapability: vc, Readonly: true, VolumeContext: v.VolumeContext})
	wantData := VolumeData{SpecVolID: "pv-1", VolumeHandle: "vol-1", DriverName: testDriver, NodeName: testNode,
		AttachmentID: volumeutil.AttachmentName("vol-1", testDriver, testNode), VolumeLifecycleMode: "Persistent"}
	if d := readData(t, filepath.Dir(target)); d != wantData {
		t.Errorf("target vol_data.json = %+v, want %+v", d, wantData)
	}

	if err := mnt.Expand(ctx, v, staging, target, resource.MustParse("2Gi")); err != nil {
		t.Fatal(err)
	}
	checkRequest(t, lastCall[*csi.NodeExpandVolumeRequest](t, f), &csi.NodeExpandVolumeRequest{
		VolumeId: "vol-1", VolumePath: target, StagingTargetPath: staging,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30}, VolumeCapability: vc})

	// A kubelet that restarted knows only the paths: vol_data.json names the volume.
	if err := mnt.Unpublish(ctx, &kubelet.Volume{PVName: "pv-1"}, target); err != nil {
		t.Fatal(err)
	}
	checkRequest(t, lastCall[*csi.NodeUnpublishVolumeRequest](t, f), &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: target})
	gone(t, filepath.Dir(target))

	if err := mnt.Unstage(ctx, v, staging); err != nil {
		t.Fatal(err)
	}
	checkRequest(t, lastCall[*csi.NodeUnstageVolumeRequest](t, f), &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging})
	gone(t, filepath.Dir(staging))
	if _, err := os.Stat(filepath.Dir(filepath.Dir(staging))); err != nil {
		t.Errorf("the staging dir's parent, shared by all volumes, went: %v", err)
	}
}

// TestCSIMounterErrors: an unregistered driver and a driver's refusal give errors that
// name the driver, call and volume, and keep the gRPC code.
func TestCSIMounterErrors(t *testing.T) {
	e, _ := registeredEnv(t, csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	mnt := NewCSIMounter(e.m)
	ctx := context.Background()
	staging, target := e.paths("pv-2")

	other := testVolume("pv-2", "vol-2")
	other.Driver = "other.csi.example.com"
	for name, call := range map[string]func() error{
		"stage":     func() error { return mnt.Stage(ctx, other, staging) },
		"publish":   func() error { return mnt.Publish(ctx, other, staging, target) },
		"unpublish": func() error { return mnt.Unpublish(ctx, other, target) },
		"unstage":   func() error { return mnt.Unstage(ctx, other, staging) },
		"expand":    func() error { return mnt.Expand(ctx, other, staging, target, resource.MustParse("1Gi")) },
	} {
		err := call()
		if !errors.Is(err, ErrNotRegistered) || !strings.Contains(err.Error(), "other.csi.example.com") || !strings.Contains(err.Error(), testNode) {
			t.Errorf("%s with an unregistered driver = %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Dir(staging)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a call for an unregistered driver made %s (%v)", filepath.Dir(staging), err)
	}

	bad := testVolume("pv-2", failHandle)
	err := mnt.Stage(ctx, bad, staging)
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Stage = %v, want FailedPrecondition", err)
	}
	for _, s := range []string{"NodeStageVolume", failHandle, "pv-2", "device holds xfs"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %q", err, s)
		}
	}
	// The driver refused for good: nothing is left for an unstage to find.
	gone(t, filepath.Dir(staging))

	bad.AccessMode = "ReadWriteSometimes"
	if err := mnt.Stage(ctx, bad, staging); err == nil || !strings.Contains(err.Error(), "ReadWriteSometimes") {
		t.Errorf("Stage with an unknown access mode = %v", err)
	}
}

// TestCSIMounterWithoutStaging: a driver without STAGE_UNSTAGE_VOLUME and EXPAND_VOLUME
// gets no NodeStage, NodeUnstage or NodeExpand and no staging path; vol_data.json
// beside the staging path is still kept for unstage.
func TestCSIMounterWithoutStaging(t *testing.T) {
	e, f := registeredEnv(t)
	mnt := NewCSIMounter(e.m)
	ctx := context.Background()
	v := testVolume("pv-3", "vol-3")
	v.ReadOnly = false
	staging, target := e.paths("pv-3")
	if err := mnt.Stage(ctx, v, staging); err != nil {
		t.Fatal(err)
	}
	if n := len(callsOf[*csi.NodeStageVolumeRequest](f)); n != 0 {
		t.Errorf("%d NodeStageVolume calls to a driver that does not stage", n)
	}
	if d := readData(t, filepath.Dir(staging)); d.VolumeHandle != "vol-3" {
		t.Errorf("staging vol_data.json = %+v", d)
	}
	if err := mnt.Publish(ctx, v, staging, target); err != nil {
		t.Fatal(err)
	}
	checkRequest(t, lastCall[*csi.NodePublishVolumeRequest](t, f), &csi.NodePublishVolumeRequest{
		VolumeId: "vol-3", PublishContext: v.PublishContext, TargetPath: target,
		VolumeCapability: mountCapability("xfs", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER), VolumeContext: v.VolumeContext})
	if err := mnt.Expand(ctx, v, staging, target, resource.MustParse("2Gi")); err != nil {
		t.Fatal(err)
	}
	if err := mnt.Unpublish(ctx, v, target); err != nil {
		t.Fatal(err)
	}
	if err := mnt.Unstage(ctx, v, staging); err != nil {
		t.Fatal(err)
	}
	if n := len(callsOf[*csi.NodeExpandVolumeRequest](f)) + len(callsOf[*csi.NodeUnstageVolumeRequest](f)); n != 0 {
		t.Errorf("%d NodeExpand/NodeUnstage calls to a driver without those capabilities", n)
	}
	gone(t, filepath.Dir(staging), filepath.Dir(target))
}

func TestVolumeCapability(t *testing.T) {
	for mode, want := range map[corev1.PersistentVolumeAccessMode]csi.VolumeCapability_AccessMode_Mode{
		"":                      csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
		corev1.ReadWriteOnce:    csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
		corev1.ReadOnlyMany:     csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY,
		corev1.ReadWriteMany:    csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER,
		corev1.ReadWriteOncePod: csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
	} {
		got, err := volumeCapability(&kubelet.Volume{Handle: "vol-1", FSType: "ext4", AccessMode: mode})
		if err != nil {
			t.Fatalf("%q: %v", mode, err)
		}
		if !proto.Equal(got, mountCapability("ext4", want)) {
			t.Errorf("%q: capability %v, want mode %v", mode, got, want)
		}
	}
}
