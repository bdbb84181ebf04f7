package cloud

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/kubelab/kubelab/internal/cloud/blockdev"
	"github.com/kubelab/kubelab/internal/testutil"
)

// realDataDir makes a data dir for a real-mode cloud and, when the test ends, checks
// that no loop device is left over its volume files (releasing any, so that a failing
// test still leaves nothing behind).
func realDataDir(t testing.TB, wantNone bool) string {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() {
		left := blockdev.Loop{}.List(filepath.Join(dir, "volumes"))
		for dev := range left {
			blockdev.Loop{}.Detach(dev)
		}
		if wantNone && len(left) > 0 {
			t.Errorf("loop devices left behind: %v", left)
		}
	})
	return dir
}

func readLink(t testing.TB, p string) string {
	t.Helper()
	target, err := os.Readlink(p)
	if err != nil {
		t.Fatalf("device link: %v", err)
	}
	return target
}

func devSize(t testing.TB, dev string) int64 {
	t.Helper()
	n, err := blockdev.Loop{}.Size(dev)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// pattern is data written at offset through a device and read back later.
var pattern = bytes.Repeat([]byte("kubelab-ebs-"), 4096/12+1)[:4096]

func writeAt(t testing.TB, path string, off int64, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func readAt(t testing.TB, path string, off int64, n int) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b
}

func (r *running) attach(t testing.TB, vol, inst, device string) types.Volume {
	t.Helper()
	if _, err := r.ec2.AttachVolume(context.Background(), &ec2.AttachVolumeInput{VolumeId: &vol, InstanceId: &inst, Device: &device}); err != nil {
		t.Fatalf("attach %s to %s: %v", vol, inst, err)
	}
	return r.waitVolume(t, vol, func(v types.Volume) bool { return attachedState(v) == "attached" })
}

func (r *running) detach(t testing.TB, vol string) {
	t.Helper()
	if _, err := r.ec2.DetachVolume(context.Background(), &ec2.DetachVolumeInput{VolumeId: &vol}); err != nil {
		t.Fatalf("detach %s: %v", vol, err)
	}
	r.waitVolume(t, vol, func(v types.Volume) bool { return v.State == types.VolumeStateAvailable })
}

// TestRealLifecycle: create → attach → write through the device → detach → snapshot →
// restore into a new volume (same data) → modify (the device grows) → delete, on real
// loop devices.
func TestRealLifecycle(t *testing.T) {
	testutil.RequireRoot(t)
	dir := realDataDir(t, true)
	r := startCloud(t, Config{DataDir: dir})
	ctx := context.Background()
	inst := r.runInstance(t, "us-east-1b")
	devDir := filepath.Join(dir, "instances", inst, "dev")

	vol := r.createVolume(t, "us-east-1b", 1)
	volFile := filepath.Join(dir, "volumes", vol+".img")
	if st, err := os.Stat(volFile); err != nil || st.Size() != 1<<30 {
		t.Fatalf("volume file %s: %v %v", volFile, st, err)
	}
	r.attach(t, vol, inst, "/dev/xvdba")
	link := filepath.Join(devDir, "xvdba")
	dev := readLink(t, link)
	if !strings.HasPrefix(dev, "/dev/loop") {
		t.Fatalf("link %s -> %s, want a loop device", link, dev)
	}
	if byID := readLink(t, filepath.Join(devDir, "disk", "by-id", "nvme-Amazon_Elastic_Block_Store_"+strings.ReplaceAll(vol, "-", ""))); byID != dev {
		t.Fatalf("by-id link -> %s, want %s", byID, dev)
	}
	if got := (blockdev.Loop{}).BackingFile(dev); got != volFile {
		t.Fatalf("%s backed by %q, want %s", dev, got, volFile)
	}
	if n := devSize(t, dev); n != 1<<30 {
		t.Fatalf("device size %d, want 1 GiB", n)
	}
	writeAt(t, link, 0, pattern)
	writeAt(t, link, 700<<20, pattern)

	r.detach(t, vol)
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Fatalf("link %s still there after detach (%v)", link, err)
	}
	if got := (blockdev.Loop{}).BackingFile(dev); got == volFile {
		t.Fatalf("%s still backed by the volume after detach", dev)
	}

	snap, err := r.ec2.CreateSnapshot(ctx, &ec2.CreateSnapshotInput{VolumeId: &vol, Description: aws.String("lifecycle")})
	if err != nil {
		t.Fatal(err)
	}
	if snap.State != types.SnapshotStatePending {
		t.Errorf("snapshot answered %q, want pending", snap.State)
	}
	waitSnapshot(t, r, *snap.SnapshotId)

	restored, err := r.ec2.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String("us-east-1b"), SnapshotId: snap.SnapshotId, Size: aws.Int32(2), VolumeType: types.VolumeTypeGp2})
	if err != nil {
		t.Fatal(err)
	}
	vol2 := *restored.VolumeId
	v2 := r.waitVolume(t, vol2, func(v types.Volume) bool { return v.State == types.VolumeStateAvailable })
	if *v2.Size != 2 || *v2.SnapshotId != *snap.SnapshotId || *v2.Iops != 100 {
		t.Errorf("restored volume: size %d snapshot %s iops %d", *v2.Size, *v2.SnapshotId, *v2.Iops)
	}
	r.attach(t, vol2, inst, "/dev/xvdbb")
	link2 := filepath.Join(devDir, "xvdbb")
	dev2 := readLink(t, link2)
	if n := devSize(t, dev2); n != 2<<30 {
		t.Fatalf("restored device size %d, want 2 GiB", n)
	}
	if got := readAt(t, link2, 0, len(pattern)); !bytes.Equal(got, pattern) {
		t.Fatalf("restored data at 0 differs")
	}
	if got := readAt(t, link2, 700<<20, len(pattern)); !bytes.Equal(got, pattern) {
		t.Fatalf("restored data at 700 MiB differs")
	}

	// Modify while attached: the device takes the new size.
	mod, err := r.ec2.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: &vol2, Size: aws.Int32(10), VolumeType: types.VolumeTypeGp3, Iops: aws.Int32(4000)})
	if err != nil {
		t.Fatal(err)
	}
	if mod.VolumeModification.ModificationState != types.VolumeModificationStateModifying || *mod.VolumeModification.OriginalSize != 2 || *mod.VolumeModification.TargetSize != 10 {
		t.Errorf("modification answered %+v", mod.VolumeModification)
	}
	waitModification(t, r, vol2)
	if n := devSize(t, dev2); n != 10<<30 {
		t.Fatalf("device size after modify %d, want 10 GiB", n)
	}
	v2 = r.waitVolume(t, vol2, func(v types.Volume) bool { return *v.Size == 10 })
	if v2.VolumeType != types.VolumeTypeGp3 || *v2.Iops != 4000 || *v2.Throughput != 125 {
		t.Errorf("modified volume: type %s iops %d throughput %d", v2.VolumeType, *v2.Iops, *v2.Throughput)
	}
	if got := readAt(t, link2, 0, len(pattern)); !bytes.Equal(got, pattern) {
		t.Fatalf("data lost in modify")
	}

	r.detach(t, vol2)
	for _, id := range []string{vol, vol2} {
		if _, err := r.ec2.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: aws.String(id)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.ec2.DeleteSnapshot(ctx, &ec2.DeleteSnapshotInput{SnapshotId: snap.SnapshotId}); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"volumes", "snapshots"} {
		if entries, _ := os.ReadDir(filepath.Join(dir, sub)); len(entries) != 0 {
			t.Errorf("%s left in %s", entries[0].Name(), sub)
		}
	}
}

// waitSnapshot waits until snapshot id is completed; one that fails fails the test.
func waitSnapshot(t testing.TB, r *running, id string) types.Snapshot {
	t.Helper()
	var s types.Snapshot
	testutil.Eventually(t, "snapshot "+id+" completed", func() (bool, error) {
		out, err := r.ec2.DescribeSnapshots(context.Background(), &ec2.DescribeSnapshotsInput{SnapshotIds: []string{id}})
		if err != nil {
			t.Fatal(err)
		}
		s = out.Snapshots[0]
		if s.State == types.SnapshotStateError {
			t.Fatalf("snapshot %s failed: %v", id, aws.ToString(s.StateMessage))
		}
		return s.State == types.SnapshotStateCompleted, fmt.Errorf("state %s", s.State)
	})
	if *s.Progress != "100%" {
		t.Errorf("completed snapshot progress %q", *s.Progress)
	}
	return s
}

// waitModification waits until vol's modification is optimizing or completed; one
// that fails fails the test.
func waitModification(t testing.TB, r *running, vol string) {
	t.Helper()
	testutil.Eventually(t, "the modification of "+vol+" optimizing", func() (bool, error) {
		out, err := r.ec2.DescribeVolumesModifications(context.Background(), &ec2.DescribeVolumesModificationsInput{VolumeIds: []string{vol}})
		if err != nil {
			t.Fatal(err)
		}
		m := out.VolumesModifications[0]
		if m.ModificationState == types.VolumeModificationStateFailed {
			t.Fatalf("modification failed: %v", aws.ToString(m.StatusMessage))
		}
		return m.ModificationState == types.VolumeModificationStateOptimizing || m.ModificationState == types.VolumeModificationStateCompleted,
			fmt.Errorf("state %s", m.ModificationState)
	})
}

// TestRealRestart: an attached volume survives a restart of the cloud (same loop
// device, same data, same links), and what nothing accounts for is cleaned up.
func TestRealRestart(t *testing.T) {
	testutil.RequireRoot(t)
	dir := realDataDir(t, true)
	r := startCloud(t, Config{DataDir: dir})
	inst := r.runInstance(t, "us-east-1a")
	devDir := filepath.Join(dir, "instances", inst, "dev")
	vol := r.createVolume(t, "us-east-1a", 1)
	r.attach(t, vol, inst, "/dev/xvdca")
	link := filepath.Join(devDir, "xvdca")
	dev := readLink(t, link)
	writeAt(t, link, 4096, pattern)
	spare := r.createVolume(t, "us-east-1a", 1)
	r.stop(t)

	if got := (blockdev.Loop{}).BackingFile(dev); got != filepath.Join(dir, "volumes", vol+".img") {
		t.Fatalf("after stop, %s is backed by %q; attached volumes must stay attached", dev, got)
	}
	// Debris a crash could leave: a volume file nobody owns, a loop device over an
	// unattached volume, a stale link.
	orphan := filepath.Join(dir, "volumes", "vol-0123456789abcdef0.img")
	if err := os.WriteFile(orphan, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	leaked, err := blockdev.Loop{}.Attach(filepath.Join(dir, "volumes", spare+".img"))
	if err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(devDir, "xvdzz")
	if err := os.Symlink(leaked, stale); err != nil {
		t.Fatal(err)
	}

	r2 := startCloud(t, Config{DataDir: dir})
	v := r2.waitVolume(t, vol, func(types.Volume) bool { return true })
	if attachedState(v) != "attached" || *v.Attachments[0].InstanceId != inst {
		t.Fatalf("after restart the volume reads %+v, want attached to %s", v.Attachments, inst)
	}
	if got := readLink(t, link); got != dev {
		t.Errorf("after restart link -> %s, want %s", got, dev)
	}
	if got := readAt(t, link, 4096, len(pattern)); !bytes.Equal(got, pattern) {
		t.Fatalf("data differs after restart")
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("orphan volume file not removed (%v)", err)
	}
	if got := (blockdev.Loop{}).BackingFile(leaked); got != "" {
		t.Errorf("leaked loop device %s still backed by %s", leaked, got)
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("stale link %s not removed (%v)", stale, err)
	}
	r2.detach(t, vol)
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Errorf("link not removed by detach after restart")
	}
}

// TestRealReleaseOnExit: with ReleaseOnExit the devices go at exit and come back at start.
func TestRealReleaseOnExit(t *testing.T) {
	testutil.RequireRoot(t)
	dir := realDataDir(t, true)
	r := startCloud(t, Config{DataDir: dir, ReleaseOnExit: true})
	inst := r.runInstance(t, "us-east-1a")
	vol := r.createVolume(t, "us-east-1a", 1)
	r.attach(t, vol, inst, "/dev/xvdba")
	link := filepath.Join(dir, "instances", inst, "dev", "xvdba")
	writeAt(t, link, 0, pattern)
	r.stop(t)
	if left := (blockdev.Loop{}).List(filepath.Join(dir, "volumes")); len(left) != 0 {
		t.Fatalf("loop devices left after exit with ReleaseOnExit: %v", left)
	}
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Fatalf("link left after exit with ReleaseOnExit")
	}
	r2 := startCloud(t, Config{DataDir: dir, ReleaseOnExit: true})
	if got := readAt(t, link, 0, len(pattern)); !bytes.Equal(got, pattern) {
		t.Fatalf("data differs after restart")
	}
	r2.stop(t)
}
