package driver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"github.com/kubelab/kubelab/internal/benchtest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// latencies collects one duration per iteration and reports percentiles.
type latencies map[string][]time.Duration

func (l latencies) add(name string, d time.Duration) { l[name] = append(l[name], d) }

func (l latencies) report(b *testing.B) {
	names := make([]string, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		benchtest.ReportLatencies(b, n, append([]time.Duration(nil), l[n]...))
	}
}

// BenchmarkRealVolumePath times, per volume, the CSI calls that bring a 1 GiB ext4
// volume to a pod: CreateVolume, ControllerPublishVolume, NodeStageVolume (mkfs and
// mount included) and NodePublishVolume, on the kubelab cloud in real mode; and the
// floor NodeStageVolume is measured against, a bare mkfs.ext4 (the options
// mount-utils uses) and mount of an equal loop device: once right after each
// volume (NodeStage-reference-mkfs+mount, so that both see the same load on a
// shared machine) and as a run of its own (bare-mkfs-mount).
func BenchmarkRealVolumePath(b *testing.B) {
	testutil.RequireRoot(b, realModeTools...)
	b.Run("driver", func(b *testing.B) {
		ce := startCloud(b, false)
		root := shortDir(b)
		cleanupMounts(b, root)
		devDir := filepath.Join(root, "dev")
		_, imdsURL := ce.runInstance(b, "us-east-1b", devDir)
		_, conn := StartDriver(b, Config{Mode: ModeAll, Endpoint: "unix://" + filepath.Join(root, "csi.sock"), DeviceDir: devDir},
			Deps{Cloud: ce.driverCloud(b), Metadata: NewIMDS(imdsURL), Mounter: NewSystemMounter(), Devices: DeviceDir{Dir: devDir},
				Logger: bufferLogger(&logBuffer{})})
		ctrl, nodeC := csi.NewControllerClient(conn), csi.NewNodeClient(conn)
		info, err := nodeC.NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		vc := mountCap("ext4")
		lat := latencies{}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			pv := fmt.Sprintf("pvc-bench-%d", i)
			t0 := time.Now()
			vol, err := ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: pv, VolumeCapabilities: []*csi.VolumeCapability{vc},
				CapacityRange:             &csi.CapacityRange{RequiredBytes: GiB},
				AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{topo("us-east-1b")}}})
			if err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			id := vol.GetVolume().GetVolumeId()
			pub, err := ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: info.GetNodeId(), VolumeCapability: vc})
			if err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			staging := filepath.Join(root, "kubelet", "plugins", "kubernetes.io", "csi", "pv", pv, "globalmount")
			if _, err := nodeC.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: vc, PublishContext: pub.GetPublishContext()}); err != nil {
				b.Fatal(err)
			}
			t3 := time.Now()
			target := filepath.Join(root, "kubelet", "pods", "uid", "volumes", "kubernetes.io~csi", pv, "mount")
			if _, err := nodeC.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: vc, PublishContext: pub.GetPublishContext()}); err != nil {
				b.Fatal(err)
			}
			t4 := time.Now()
			lat.add("CreateVolume", t1.Sub(t0))
			lat.add("ControllerPublish", t2.Sub(t1))
			lat.add("NodeStage", t3.Sub(t2))
			lat.add("NodePublish", t4.Sub(t3))

			b.StopTimer()
			if _, err := nodeC.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
				b.Fatal(err)
			}
			if _, err := nodeC.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
				b.Fatal(err)
			}
			if _, err := ctrl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: info.GetNodeId()}); err != nil {
				b.Fatal(err)
			}
			if _, err := ctrl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
				b.Fatal(err)
			}
			// The reference, paired with each NodeStageVolume so that both see the
			// same load on a shared machine; not in ns/op.
			lat.add("NodeStage-reference-mkfs+mount", bareMkfsMount(b, root, i, false))
			b.StartTimer()
		}
		b.StopTimer()
		lat.report(b)
	})
	b.Run("bare-mkfs-mount", func(b *testing.B) {
		root := shortDir(b)
		cleanupMounts(b, root)
		lat := latencies{}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			lat.add("mkfs+mount", bareMkfsMount(b, root, i, true))
		}
		b.StopTimer()
		lat.report(b)
	})
}

// bareMkfsMount is the reference NodeStageVolume is measured against: on an equal
// 1 GiB loop device (set up and torn down with the timer stopped), mkfs.ext4 with
// mount-utils' options and mount -t ext4 -o defaults, as commands. It returns how
// long those two took; with timed, the benchmark's timer runs for them only.
func bareMkfsMount(b *testing.B, root string, i int, timed bool) time.Duration {
	if timed {
		b.StopTimer()
		defer b.StartTimer()
	}
	img := filepath.Join(root, fmt.Sprintf("ref-%d.img", i))
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.Truncate(img, GiB); err != nil {
		b.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", img).Output()
	if err != nil {
		b.Fatalf("losetup: %v", err)
	}
	dev := strings.TrimSpace(string(out))
	detached := false
	b.Cleanup(func() {
		if !detached {
			_ = exec.Command("losetup", "-d", dev).Run()
		}
	})
	mnt := filepath.Join(root, fmt.Sprintf("ref-mnt-%d", i))
	if err := os.Mkdir(mnt, 0o750); err != nil {
		b.Fatal(err)
	}
	if timed {
		b.StartTimer()
	}
	t0 := time.Now()
	if out, err := exec.Command("mkfs.ext4", "-F", "-m0", dev).CombinedOutput(); err != nil {
		b.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	if out, err := exec.Command("mount", "-t", "ext4", "-o", "defaults", dev, mnt).CombinedOutput(); err != nil {
		b.Fatalf("mount: %v: %s", err, out)
	}
	d := time.Since(t0)
	if timed {
		b.StopTimer()
	}
	if err := unix.Unmount(mnt, 0); err != nil {
		b.Fatal(err)
	}
	if err := exec.Command("losetup", "-d", dev).Run(); err != nil {
		b.Fatal(err)
	}
	detached = true
	os.Remove(img)
	os.Remove(mnt)
	return d
}
