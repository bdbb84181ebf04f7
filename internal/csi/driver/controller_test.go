package driver

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestIdentity(t *testing.T) {
	e := newHollowEnv(t, "us-east-1b")
	ctx := context.Background()
	info, err := e.ident.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil || info.GetName() != "ebs.csi.aws.com" || info.GetVendorVersion() == "" {
		t.Fatalf("plugin info %v, %v", info, err)
	}
	caps, err := e.ident.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ctrl, topo bool
	for _, c := range caps.GetCapabilities() {
		ctrl = ctrl || c.GetService().GetType() == csi.PluginCapability_Service_CONTROLLER_SERVICE
		topo = topo || c.GetService().GetType() == csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS
	}
	if !ctrl || !topo {
		t.Fatalf("capabilities %v lack controller service or topology", caps)
	}
	p, err := e.ident.Probe(ctx, &csi.ProbeRequest{})
	if err != nil || !p.GetReady().GetValue() {
		t.Fatalf("probe %v, %v", p, err)
	}
}

func TestCreateVolumeIdempotentByName(t *testing.T) {
	e := newHollowEnv(t, "us-east-1b")
	ctx := context.Background()
	req := &csi.CreateVolumeRequest{
		Name:               "pvc-1",
		CapacityRange:      &csi.CapacityRange{RequiredBytes: 3*GiB - 5},
		VolumeCapabilities: []*csi.VolumeCapability{mountCap("ext4")},
		Parameters:         map[string]string{"type": "gp2", "blockSize": "4096"},
		AccessibilityRequirements: &csi.TopologyRequirement{
			Requisite: []*csi.Topology{topo("us-east-1a"), topo("us-east-1b")},
			Preferred: []*csi.Topology{topo("us-east-1b")},
		},
	}
	first, err := e.ctrl.CreateVolume(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	v := first.GetVolume()
	if v.GetCapacityBytes() != 3*GiB || zoneOf(v.GetAccessibleTopology()[0]) != "us-east-1b" ||
		v.GetVolumeContext()["blocksize"] != "4096" {
		t.Fatalf("volume %v: want 3 GiB in us-east-1b with blocksize in its context", v)
	}
	second, err := e.ctrl.CreateVolume(ctx, req)
	if err != nil || second.GetVolume().GetVolumeId() != v.GetVolumeId() {
		t.Fatalf("second create: %v, %v; want the same volume %s", second, err, v.GetVolumeId())
	}
	if n := len(e.cloud.Volumes()); n != 1 {
		t.Fatalf("%d volumes in the cloud, want 1", n)
	}
	vols := e.cloud.Volumes()
	if vols[0].Tags[TagVolumeName] != "pvc-1" || vols[0].Tags[TagCluster] != "true" || vols[0].Type != "gp2" {
		t.Fatalf("volume tags/type %v %s", vols[0].Tags, vols[0].Type)
	}
	req.CapacityRange.RequiredBytes = 5 * GiB
	_, err = e.ctrl.CreateVolume(ctx, req)
	wantCode(t, err, codes.AlreadyExists, "same name, other size")
	req.CapacityRange.RequiredBytes = 3 * GiB
	req.Parameters["type"] = "io1"
	_, err = e.ctrl.CreateVolume(ctx, req)
	wantCode(t, err, codes.AlreadyExists, "same name, other type")
	req.Parameters["type"] = "gp2"
	req.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: []*csi.Topology{topo("us-east-1a")}}
	_, err = e.ctrl.CreateVolume(ctx, req)
	wantCode(t, err, codes.AlreadyExists, "same name, a topology the volume is outside of")
	if n := len(e.cloud.Volumes()); n != 1 {
		t.Fatalf("%d volumes in the cloud after the refused requests, want 1", n)
	}
}

func TestSameVolume(t *testing.T) {
	e := &Disk{ID: "vol-1", SizeGiB: 4, Type: "gp3", Zone: "us-east-1a", SnapshotID: "snap-1", Tags: map[string]string{TagSourceVolume: "vol-src"}}
	in1a := &csi.TopologyRequirement{Requisite: []*csi.Topology{topo("us-east-1a"), topo("us-east-1b")}}
	for _, c := range []struct {
		name           string
		size           int32
		typ, snap, src string
		topology       *csi.TopologyRequirement
		differs        bool
	}{
		{"the same", 4, "gp3", "", "vol-src", in1a, false},
		{"no topology asked", 4, "gp3", "snap-1", "", nil, false},
		{"other size", 5, "gp3", "", "", nil, true},
		{"other type", 4, "io2", "", "", nil, true},
		{"other snapshot", 4, "gp3", "snap-2", "", nil, true},
		{"other source volume", 4, "gp3", "", "vol-other", nil, true},
		{"outside the topology", 4, "gp3", "", "", &csi.TopologyRequirement{Requisite: []*csi.Topology{topo("us-east-1b")}}, true},
	} {
		if msg := sameVolume(e, c.size, c.typ, c.snap, c.src, c.topology); (msg != "") != c.differs {
			t.Errorf("%s: %q, differs %v", c.name, msg, c.differs)
		}
	}
}

func TestCreateVolumeRefusesBadInput(t *testing.T) {
	e := newHollowEnv(t, "us-east-1b")
	ctx := context.Background()
	caps := []*csi.VolumeCapability{mountCap("")}
	tests := []struct {
		name string
		req  *csi.CreateVolumeRequest
		code codes.Code
		msg  string
	}{
		{"no name", &csi.CreateVolumeRequest{VolumeCapabilities: caps}, codes.InvalidArgument, "name"},
		{"no caps", &csi.CreateVolumeRequest{Name: "a"}, codes.InvalidArgument, "capabilities"},
		{"unknown parameter", &csi.CreateVolumeRequest{Name: "a", VolumeCapabilities: caps, Parameters: map[string]string{"colour": "blue"}}, codes.InvalidArgument, "colour"},
		{"multi-node on gp3", &csi.CreateVolumeRequest{Name: "a", VolumeCapabilities: []*csi.VolumeCapability{{
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
			AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}}}}, codes.InvalidArgument, "io2"},
		{"limit below required", &csi.CreateVolumeRequest{Name: "a", VolumeCapabilities: caps, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * GiB, LimitBytes: GiB}}, codes.OutOfRange, "limit"},
		{"missing snapshot", &csi.CreateVolumeRequest{Name: "a", VolumeCapabilities: caps, VolumeContentSource: &csi.VolumeContentSource{
			Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "snap-404"}}}}, codes.NotFound, "snap-404"},
		{"missing source volume", &csi.CreateVolumeRequest{Name: "a", VolumeCapabilities: caps, VolumeContentSource: &csi.VolumeContentSource{
			Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "vol-404"}}}}, codes.NotFound, "vol-404"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.ctrl.CreateVolume(ctx, tt.req)
			wantCode(t, err, tt.code, tt.name)
			if !strings.Contains(status.Convert(err).Message(), tt.msg) {
				t.Fatalf("message %q does not name %q", status.Convert(err).Message(), tt.msg)
			}
		})
	}
	if n := len(e.cloud.Volumes()); n != 0 {
		t.Fatalf("%d volumes left behind by refused requests", n)
	}
}

func TestCreateVolumeDefaultZoneAndFailureCleanup(t *testing.T) {
	e := newHollowEnv(t, "us-east-1b")
	ctx := context.Background()
	r, err := e.ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "z", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")}})
	if err != nil {
		t.Fatal(err)
	}
	if z := zoneOf(r.GetVolume().GetAccessibleTopology()[0]); z != "us-east-1b" {
		t.Fatalf("default zone in all mode %s, want the node's zone us-east-1b", z)
	}
	// A controller alone takes the region's first zone.
	_, conn := StartDriver(t, Config{Mode: ModeController}, Deps{Cloud: e.cloud})
	r2, err := csi.NewControllerClient(conn).CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "z2", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")}})
	if err != nil {
		t.Fatal(err)
	}
	if z := zoneOf(r2.GetVolume().GetAccessibleTopology()[0]); z != "us-east-1a" {
		t.Fatalf("default zone of a lone controller %s, want the first zone us-east-1a", z)
	}
	if r.GetVolume().GetCapacityBytes() != 100*GiB {
		t.Fatalf("default size %d, want 100 GiB", r.GetVolume().GetCapacityBytes())
	}
	e.cloud.Fail = func(op, id string) error {
		if op == "CreateVolume" {
			return errors.New("ec2 CreateVolume: InternalError: boom")
		}
		return nil
	}
	_, err = e.ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "y", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")}})
	wantCode(t, err, codes.Internal, "cloud failure")
}

func TestPublishUnpublishAndZoneMismatch(t *testing.T) {
	e := newHollowEnv(t, "us-east-1b")
	ctx := context.Background()
	other := e.cloud.AddInstance("us-east-1b", "m5.large")
	inA := e.cloud.AddInstance("us-east-1a", "m5.large")
	vol, err := e.ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "p", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")},
		CapacityRange:             &csi.CapacityRange{RequiredBytes: GiB},
		AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{topo("us-east-1b")}}})
	if err != nil {
		t.Fatal(err)
	}
	id := vol.GetVolume().GetVolumeId()
	pub := &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: e.node, VolumeCapability: mountCap("")}
	r, err := e.ctrl.ControllerPublishVolume(ctx, pub)
	if err != nil {
		t.Fatal(err)
	}
	if r.GetPublishContext()["devicePath"] != "/dev/xvdba" {
		t.Fatalf("publish context %v, want devicePath /dev/xvdba", r.GetPublishContext())
	}
	// Idempotent: same node again.
	r2, err := e.ctrl.ControllerPublishVolume(ctx, pub)
	if err != nil || r2.GetPublishContext()["devicePath"] != "/dev/xvdba" {
		t.Fatalf("second publish %v, %v", r2, err)
	}
	if n := e.cloud.Calls("AttachVolume"); n != 1 {
		t.Fatalf("AttachVolume called %d times, want 1", n)
	}
	// Another node: refused while attached.
	_, err = e.ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: other, VolumeCapability: mountCap("")})
	wantCode(t, err, codes.FailedPrecondition, "publish to a second node")
	// Unknown node and volume.
	_, err = e.ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: "i-404", VolumeCapability: mountCap("")})
	wantCode(t, err, codes.NotFound, "unknown node")
	_, err = e.ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "vol-404", NodeId: e.node, VolumeCapability: mountCap("")})
	wantCode(t, err, codes.NotFound, "unknown volume")
	// A second volume gets the next device name.
	vol2, err := e.ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "p2", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")},
		CapacityRange: &csi.CapacityRange{RequiredBytes: GiB}, AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{topo("us-east-1b")}}})
	if err != nil {
		t.Fatal(err)
	}
	r3, err := e.ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: vol2.GetVolume().GetVolumeId(), NodeId: e.node, VolumeCapability: mountCap("")})
	if err != nil || r3.GetPublishContext()["devicePath"] != "/dev/xvdbb" {
		t.Fatalf("second volume publish %v, %v; want /dev/xvdbb", r3, err)
	}
	// Delete while attached: FailedPrecondition.
	_, err = e.ctrl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
	wantCode(t, err, codes.FailedPrecondition, "delete attached volume")
	// Unpublish, twice.
	for i := 0; i < 2; i++ {
		if _, err := e.ctrl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: e.node}); err != nil {
			t.Fatalf("unpublish %d: %v", i, err)
		}
	}
	for _, v := range e.cloud.Volumes() {
		if v.ID == id && len(v.Attachments) != 0 {
			t.Fatalf("volume still attached: %v", v.Attachments)
		}
	}
	// Zone mismatch: a zone-b volume to a zone-a instance.
	_, err = e.ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: inA, VolumeCapability: mountCap("")})
	wantCode(t, err, codes.FailedPrecondition, "zone mismatch")
	if !strings.Contains(status.Convert(err).Message(), "us-east-1a") {
		t.Fatalf("zone mismatch message %q names no zone", status.Convert(err).Message())
	}
	for _, v := range e.cloud.Volumes() {
		if v.ID == id && len(v.Attachments) != 0 {
			t.Fatalf("zone mismatch left an attachment: %v", v.Attachments)
		}
	}
	if _, err := e.ctrl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ctrl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
		t.Fatalf("second delete: %v", err)
	}
}

func TestConcurrentOperationAborted(t *testing.T) {
	e := newHollowEnv(t, "us-east-1b")
	ctx := context.Background()
	if !e.d.ctrlLocks.tryLock("vol-busy") {
		t.Fatal("lock")
	}
	_, err := e.ctrl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "vol-busy"})
	wantCode(t, err, codes.Aborted, "delete during another operation")
	_, err = e.ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "vol-busy", NodeId: e.node, VolumeCapability: mountCap("")})
	wantCode(t, err, codes.Aborted, "publish during another operation")
	e.d.ctrlLocks.unlock("vol-busy")
	if !e.d.nodeInflight.tryLock("vol-busy") {
		t.Fatal("node lock")
	}
	_, err = e.nodeC.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-busy", StagingTargetPath: "/nonexistent"})
	wantCode(t, err, codes.Aborted, "unstage during another operation")
}

func TestExpandAndSnapshots(t *testing.T) {
	e := newHollowEnv(t, "us-east-1b")
	ctx := context.Background()
	vol, err := e.ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")},
		CapacityRange: &csi.CapacityRange{RequiredBytes: GiB}})
	if err != nil {
		t.Fatal(err)
	}
	id := vol.GetVolume().GetVolumeId()
	exp, err := e.ctrl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * GiB}})
	if err != nil || exp.GetCapacityBytes() != 2*GiB || !exp.GetNodeExpansionRequired() {
		t.Fatalf("expand %v, %v", exp, err)
	}
	_, err = e.ctrl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "vol-404", CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * GiB}})
	wantCode(t, err, codes.NotFound, "expand unknown volume")
	_, err = e.ctrl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id})
	wantCode(t, err, codes.InvalidArgument, "expand without capacity")

	var snaps []string
	for i := 0; i < 7; i++ {
		s, err := e.ctrl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-" + string(rune('a'+i)), SourceVolumeId: id})
		if err != nil {
			t.Fatal(err)
		}
		if s.GetSnapshot().GetSizeBytes() != 2*GiB || s.GetSnapshot().GetSourceVolumeId() != id {
			t.Fatalf("snapshot %v", s)
		}
		snaps = append(snaps, s.GetSnapshot().GetSnapshotId())
	}
	again, err := e.ctrl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-a", SourceVolumeId: id})
	if err != nil || again.GetSnapshot().GetSnapshotId() != snaps[0] {
		t.Fatalf("same-name snapshot %v, %v", again, err)
	}
	other, err := e.ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "x2", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")}, CapacityRange: &csi.CapacityRange{RequiredBytes: GiB}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.ctrl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-a", SourceVolumeId: other.GetVolume().GetVolumeId()})
	wantCode(t, err, codes.AlreadyExists, "same snapshot name, other volume")

	// Pages of 2 (below EC2's minimum page of 5) cover all 7 exactly once.
	seen := map[string]bool{}
	token := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("pagination does not end")
		}
		r, err := e.ctrl.ListSnapshots(ctx, &csi.ListSnapshotsRequest{MaxEntries: 2, StartingToken: token})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.GetEntries()) > 2 {
			t.Fatalf("page of %d entries, asked 2", len(r.GetEntries()))
		}
		for _, en := range r.GetEntries() {
			if seen[en.GetSnapshot().GetSnapshotId()] {
				t.Fatalf("snapshot %s listed twice", en.GetSnapshot().GetSnapshotId())
			}
			seen[en.GetSnapshot().GetSnapshotId()] = true
		}
		if token = r.GetNextToken(); token == "" {
			break
		}
	}
	if len(seen) != 7 {
		t.Fatalf("listed %d snapshots, want 7", len(seen))
	}
	_, err = e.ctrl.ListSnapshots(ctx, &csi.ListSnapshotsRequest{StartingToken: "invalid-token"})
	wantCode(t, err, codes.Aborted, "invalid starting token")
	r, err := e.ctrl.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SnapshotId: "snap-404"})
	if err != nil || len(r.GetEntries()) != 0 {
		t.Fatalf("list unknown snapshot id: %v, %v", r, err)
	}

	// Restore and clone (through a snapshot when the cloud has no CopyVolumes).
	restored, err := e.ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "r", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snaps[0]}}}})
	if err != nil || restored.GetVolume().GetCapacityBytes() != 2*GiB {
		t.Fatalf("restore %v, %v", restored, err)
	}
	e.cloud.NoCopyVolumes = true
	clone, err := e.ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "c", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: id}}}})
	if err != nil || clone.GetVolume().GetCapacityBytes() != 2*GiB || clone.GetVolume().GetContentSource().GetVolume().GetVolumeId() != id {
		t.Fatalf("clone %v, %v", clone, err)
	}
	// A retry is the same clone; the same name cloning another volume is not.
	retried, err := e.ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "c", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: id}}}})
	if err != nil || retried.GetVolume().GetVolumeId() != clone.GetVolume().GetVolumeId() {
		t.Fatalf("clone retried: %v, %v; want %s", retried, err, clone.GetVolume().GetVolumeId())
	}
	_, err = e.ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "c", VolumeCapabilities: []*csi.VolumeCapability{mountCap("")},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: restored.GetVolume().GetVolumeId()}}}})
	wantCode(t, err, codes.AlreadyExists, "same name, clone of another volume")
	all, err := e.ctrl.ListSnapshots(ctx, &csi.ListSnapshotsRequest{})
	if err != nil || len(all.GetEntries()) != 7 {
		t.Fatalf("after clone %d snapshots (%v), want the 7: the clone's snapshot must be gone", len(all.GetEntries()), err)
	}
	for _, s := range snaps {
		if _, err := e.ctrl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: s}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.ctrl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snaps[0]}); err != nil {
		t.Fatalf("second delete: %v", err)
	}
}
