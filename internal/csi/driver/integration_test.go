package driver

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kubelab/kubelab/internal/testutil"
)

// realNode is a node plugin for one instance of the cloud, with its kubelet root.
type realNode struct {
	id    string
	root  string // <node>/kubelet
	node  csi.NodeClient
	ident csi.IdentityClient
}

func (n *realNode) staging(pv string) string {
	return filepath.Join(n.root, "plugins", "kubernetes.io", "csi", "pv", pv, "globalmount")
}

func (n *realNode) target(pod, pv string) string {
	return filepath.Join(n.root, "pods", pod, "volumes", "kubernetes.io~csi", pv, "mount")
}

// startRealNode launches an instance in zone and a node plugin for it, as
// `kubelab csi-driver --mode node --device-dir D --imds-endpoint URL` would run.
func startRealNode(t *testing.T, ce *cloudEnv, base, name, zone string) *realNode {
	t.Helper()
	nodeDir := filepath.Join(base, name)
	devDir := filepath.Join(nodeDir, "dev")
	id, imdsURL := ce.runInstance(t, zone, devDir)
	_, conn := StartDriver(t, Config{
		Mode: ModeNode, Endpoint: "unix://" + filepath.Join(nodeDir, "csi.sock"), DeviceDir: devDir,
	}, Deps{Metadata: NewIMDS(imdsURL), Mounter: NewSystemMounter(), Devices: DeviceDir{Dir: devDir}})
	return &realNode{id: id, root: filepath.Join(nodeDir, "kubelet"), node: csi.NewNodeClient(conn), ident: csi.NewIdentityClient(conn)}
}

// dfSize is the filesystem size at path as df reports it, in bytes.
func dfSize(t *testing.T, path string) int64 {
	t.Helper()
	out, err := exec.Command("df", "-B1", "--output=size", path).Output()
	if err != nil {
		t.Fatalf("df %s: %v", path, err)
	}
	f := strings.Fields(string(out))
	n, err := strconv.ParseInt(f[len(f)-1], 10, 64)
	if err != nil {
		t.Fatalf("df %s: %q", path, out)
	}
	return n
}

// fsTypeAt is the filesystem type mounted at path, from findmnt.
func fsTypeAt(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("findmnt", "-n", "-o", "FSTYPE", "--mountpoint", path).Output()
	if err != nil {
		t.Fatalf("findmnt %s: %v", path, err)
	}
	return strings.TrimSpace(strings.Split(string(out), "\n")[0])
}

// hasCapSysResource reports whether this process may resize a mounted ext4
// filesystem (CAP_SYS_RESOURCE, bit 24 of the effective set).
func hasCapSysResource() bool {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && n&(1<<24) != 0
		}
	}
	return false
}

// TestIntegrationReal walks a volume through the whole CSI flow in real mode, for
// ext4 and xfs: created in zone b, attached to a zone-b instance, formatted and
// mounted at the staging path, bind-mounted into a pod, written, torn down, moved to
// another zone-b instance where the file is still there, grown from 1 to 2 GiB as
// df sees it; and a zone-a volume refused by a zone-b instance.
func TestIntegrationReal(t *testing.T) {
	testutil.RequireRoot(t, append(realModeTools, "findmnt")...)
	ce := startCloud(t, false)
	base := shortDir(t)
	cleanupMounts(t, base)
	ctx := context.Background()

	_, cconn := StartDriver(t, Config{Mode: ModeController, Endpoint: "unix://" + filepath.Join(base, "controller.sock")},
		Deps{Cloud: ce.driverCloud(t)})
	ctrl := csi.NewControllerClient(cconn)
	b1 := startRealNode(t, ce, base, "b1", "us-east-1b")
	b2 := startRealNode(t, ce, base, "b2", "us-east-1b")

	for _, fs := range []string{"ext4", "xfs"} {
		t.Run(fs, func(t *testing.T) {
			pv := "pvc-it-" + fs
			vc := &csi.VolumeCapability{
				AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
				AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fs}},
			}
			vol, err := ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{
				Name: pv, VolumeCapabilities: []*csi.VolumeCapability{vc},
				CapacityRange: &csi.CapacityRange{RequiredBytes: GiB},
				Parameters:    map[string]string{"type": "gp3", "csi.storage.k8s.io/fstype": fs},
				AccessibilityRequirements: &csi.TopologyRequirement{
					Requisite: []*csi.Topology{topo("us-east-1b")}, Preferred: []*csi.Topology{topo("us-east-1b")},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			id := vol.GetVolume().GetVolumeId()
			if z := zoneOf(vol.GetVolume().GetAccessibleTopology()[0]); z != "us-east-1b" {
				t.Fatalf("volume in %s, want us-east-1b", z)
			}

			// Node b1: attach, stage (mkfs), publish, write.
			pub, err := ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: b1.id, VolumeCapability: vc})
			if err != nil {
				t.Fatal(err)
			}
			stage := &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: b1.staging(pv), VolumeCapability: vc,
				PublishContext: pub.GetPublishContext(), VolumeContext: vol.GetVolume().GetVolumeContext()}
			if _, err := b1.node.NodeStageVolume(ctx, stage); err != nil {
				t.Fatal(err)
			}
			if got := fsTypeAt(t, b1.staging(pv)); got != fs {
				t.Fatalf("staging path holds %q, want %s", got, fs)
			}
			target1 := b1.target("pod-1", pv)
			publish := &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: b1.staging(pv), TargetPath: target1,
				VolumeCapability: vc, PublishContext: pub.GetPublishContext()}
			if _, err := b1.node.NodePublishVolume(ctx, publish); err != nil {
				t.Fatal(err)
			}
			payload := []byte("written on " + b1.id + " through " + fs + "\n")
			if err := os.WriteFile(filepath.Join(target1, "data.txt"), payload, 0o644); err != nil {
				t.Fatal(err)
			}
			// The bind mount and the staging mount are the same filesystem.
			if b, err := os.ReadFile(filepath.Join(b1.staging(pv), "data.txt")); err != nil || string(b) != string(payload) {
				t.Fatalf("file not visible at the staging path: %q, %v", b, err)
			}

			// Tear down on b1.
			if _, err := b1.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target1}); err != nil {
				t.Fatal(err)
			}
			if _, err := b1.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: b1.staging(pv)}); err != nil {
				t.Fatal(err)
			}
			if _, err := ctrl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: b1.id}); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{target1, b1.staging(pv)} {
				if _, err := os.Stat(p); !os.IsNotExist(err) {
					t.Fatalf("%s left behind: %v", p, err)
				}
			}

			// Node b2: the file is there.
			pub2, err := ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: b2.id, VolumeCapability: vc})
			if err != nil {
				t.Fatal(err)
			}
			stage2 := &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: b2.staging(pv), VolumeCapability: vc,
				PublishContext: pub2.GetPublishContext(), VolumeContext: vol.GetVolume().GetVolumeContext()}
			if _, err := b2.node.NodeStageVolume(ctx, stage2); err != nil {
				t.Fatal(err)
			}
			target2 := b2.target("pod-2", pv)
			if _, err := b2.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: b2.staging(pv),
				TargetPath: target2, VolumeCapability: vc, PublishContext: pub2.GetPublishContext()}); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(target2, "data.txt"))
			if err != nil || string(got) != string(payload) {
				t.Fatalf("on %s the file reads %q, %v; want %q", b2.id, got, err, payload)
			}

			// Expand 1 -> 2 GiB: online (xfs; ext4 where the node may resize a mounted
			// ext4, i.e. has CAP_SYS_RESOURCE), else offline, grown at the next stage.
			before := dfSize(t, target2)
			online := fs == "xfs" || hasCapSysResource()
			exp, err := ctrl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id,
				CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * GiB}, VolumeCapability: vc})
			if err != nil || exp.GetCapacityBytes() != 2*GiB || !exp.GetNodeExpansionRequired() {
				t.Fatalf("controller expand: %v, %v", exp, err)
			}
			if !online {
				t.Log("no CAP_SYS_RESOURCE here: a mounted ext4 cannot grow; it grows offline, at NodeStageVolume")
				_, err := b2.node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: target2,
					CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * GiB}, VolumeCapability: vc})
				if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "CAP_SYS_RESOURCE") {
					t.Fatalf("online ext4 expand without CAP_SYS_RESOURCE: %v, want FailedPrecondition naming it", err)
				}
				if _, err := b2.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target2}); err != nil {
					t.Fatal(err)
				}
				if _, err := b2.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: b2.staging(pv)}); err != nil {
					t.Fatal(err)
				}
				if _, err := b2.node.NodeStageVolume(ctx, stage2); err != nil {
					t.Fatal(err)
				}
				if _, err := b2.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: b2.staging(pv),
					TargetPath: target2, VolumeCapability: vc, PublishContext: pub2.GetPublishContext()}); err != nil {
					t.Fatal(err)
				}
			}
			nexp, err := b2.node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: target2,
				StagingTargetPath: b2.staging(pv), CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * GiB}, VolumeCapability: vc})
			if err != nil || nexp.GetCapacityBytes() < 2*GiB {
				t.Fatalf("node expand: %v, %v", nexp, err)
			}
			after := dfSize(t, target2)
			t.Logf("%s: df size %d -> %d bytes (online %v)", fs, before, after, online)
			if before > GiB || after < before+GiB*8/10 || after > 2*GiB {
				t.Fatalf("df size %d -> %d: want a 1 GiB filesystem grown by about 1 GiB", before, after)
			}
			if got, err := os.ReadFile(filepath.Join(target2, "data.txt")); err != nil || string(got) != string(payload) {
				t.Fatalf("after growth the file reads %q, %v", got, err)
			}
			stats, err := b2.node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target2})
			if err != nil || stats.GetUsage()[0].GetTotal() != after {
				t.Fatalf("volume stats %v, %v; want total %d as df", stats, err, after)
			}

			// Tear down on b2 and delete.
			if _, err := b2.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target2}); err != nil {
				t.Fatal(err)
			}
			if _, err := b2.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: b2.staging(pv)}); err != nil {
				t.Fatal(err)
			}
			if _, err := ctrl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: b2.id}); err != nil {
				t.Fatal(err)
			}
			if _, err := ctrl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
				t.Fatal(err)
			}
		})
	}

	t.Run("zone mismatch", func(t *testing.T) {
		vol, err := ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{
			Name: "pvc-it-zone-a", VolumeCapabilities: []*csi.VolumeCapability{mountCap("ext4")},
			CapacityRange:             &csi.CapacityRange{RequiredBytes: GiB},
			AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{topo("us-east-1a")}},
		})
		if err != nil {
			t.Fatal(err)
		}
		id := vol.GetVolume().GetVolumeId()
		_, err = ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: b1.id, VolumeCapability: mountCap("ext4")})
		if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("publish of a zone-a volume to a zone-b instance: %v, want FailedPrecondition", err)
		}
		msg := status.Convert(err).Message()
		if !strings.Contains(msg, "us-east-1a") || !strings.Contains(msg, "us-east-1b") {
			t.Fatalf("error %q does not name both zones", msg)
		}
		t.Logf("zone mismatch: %s", msg)
		out, err := ce.ec2.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{id}})
		if err != nil {
			t.Fatal(err)
		}
		if a := out.Volumes[0].Attachments; len(a) != 0 {
			t.Fatalf("zone mismatch left attachments %v", a)
		}
		if _, err := os.Stat(filepath.Join(base, "b1", "dev", "disk", "by-id", "nvme-Amazon_Elastic_Block_Store_"+strings.ReplaceAll(id, "-", ""))); !os.IsNotExist(err) {
			t.Fatalf("zone mismatch left a device link: %v", err)
		}
	})
}
