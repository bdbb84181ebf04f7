package driver

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

func TestParseVolumeParams(t *testing.T) {
	tests := []struct {
		name    string
		in      map[string]string
		want    volumeParams
		wantErr string
	}{
		{name: "defaults", in: nil, want: volumeParams{Type: "gp3"}},
		{name: "io2 with iops and case-insensitive keys", in: map[string]string{"Type": "io2", "IOPS": "4000"},
			want: volumeParams{Type: "io2", IOPS: 4000}},
		{name: "gp3 throughput, encrypted with key", in: map[string]string{"type": "gp3", "throughput": "250", "encrypted": "true", "kmsKeyId": "arn:k"},
			want: volumeParams{Type: "gp3", Throughput: 250, Encrypted: true, KMSKeyID: "arn:k"}},
		{name: "mkfs options go to the context", in: map[string]string{"blockSize": "4096", "inodeSize": "512", "csi.storage.k8s.io/fstype": "xfs"},
			want: volumeParams{Type: "gp3", Context: map[string]string{"blocksize": "4096", "inodesize": "512"}}},
		{name: "tags and pv metadata", in: map[string]string{"tagSpecification_1": "team=storage", "csi.storage.k8s.io/pvc/name": "data"},
			want: volumeParams{Type: "gp3", Tags: map[string]string{"team": "storage", "kubernetes.io/created-for/pvc/name": "data"}}},
		{name: "unknown key", in: map[string]string{"speed": "fast"}, wantErr: `parameter "speed" is not supported`},
		{name: "unknown type", in: map[string]string{"type": "gp9"}, wantErr: `unknown volume type "gp9"`},
		{name: "iops not a number", in: map[string]string{"type": "io1", "iops": "lots"}, wantErr: `"lots" is not a positive integer`},
		{name: "iops on gp2", in: map[string]string{"type": "gp2", "iops": "100"}, wantErr: "iops can only be set"},
		{name: "throughput on io1", in: map[string]string{"type": "io1", "throughput": "100"}, wantErr: "throughput can only be set"},
		{name: "kms key without encryption", in: map[string]string{"kmsKeyId": "k"}, wantErr: "needs"},
		{name: "bad tag", in: map[string]string{"tagSpecification_1": "novalue"}, wantErr: "not key=value"},
		{name: "bad fstype", in: map[string]string{"csi.storage.k8s.io/fstype": "ntfs"}, wantErr: "unsupported filesystem"},
		{name: "encrypted not bool", in: map[string]string{"encrypted": "yes"}, wantErr: "not true or false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseVolumeParams(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.want.Tags == nil {
				tt.want.Tags = map[string]string{}
			}
			if tt.want.Context == nil {
				tt.want.Context = map[string]string{}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestIOPSFor(t *testing.T) {
	tests := []struct {
		p    volumeParams
		size int32
		want int32
	}{
		{volumeParams{IOPS: 3000}, 10, 3000},
		{volumeParams{IOPSPerGB: 50}, 10, 500},
		{volumeParams{IOPSPerGB: 1}, 10, 10},
		{volumeParams{IOPSPerGB: 1, AllowIOPS: true}, 10, 100},
		{volumeParams{IOPSPerGB: 500}, 1000, 64000},
	}
	for _, tt := range tests {
		if got := tt.p.iopsFor(tt.size); got != tt.want {
			t.Errorf("%+v.iopsFor(%d) = %d, want %d", tt.p, tt.size, got, tt.want)
		}
	}
}

func TestSizeGiB(t *testing.T) {
	tests := []struct {
		req, lim int64
		want     int32
		wantErr  bool
	}{
		{0, 0, 100, false},
		{1, 0, 1, false},
		{GiB, 0, 1, false},
		{GiB + 1, 0, 2, false},
		{10 * GiB, 10 * GiB, 10, false},
		{0, 5 * GiB, 5, false},
		{GiB + 1, GiB + 100, 0, true},
		{2 * GiB, GiB, 0, true},
		{0, GiB / 2, 0, true},
		{-1, 0, 0, true},
		{65 * 1024 * GiB, 0, 0, true},
	}
	for _, tt := range tests {
		got, err := sizeGiB(tt.req, tt.lim, 100)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("sizeGiB(%d, %d) = %d, %v; want %d, error %v", tt.req, tt.lim, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestMkfsOptions(t *testing.T) {
	ctx := map[string]string{"blocksize": "1024", "inodesize": "256", "bytesperinode": "8192", "numberofinodes": "1000"}
	got, err := mkfsOptions("ext4", ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"-b", "1024", "-I", "256", "-i", "8192", "-N", "1000"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ext4 options %v, want %v", got, want)
	}
	got, err = mkfsOptions("xfs", map[string]string{"blocksize": "4096", "inodesize": "512"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"-b", "size=4096", "-i", "size=512"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("xfs options %v, want %v", got, want)
	}
	if _, err := mkfsOptions("xfs", map[string]string{"bytesperinode": "8192"}); err == nil {
		t.Fatal("xfs with bytesperinode: no error")
	}
	if _, err := mkfsOptions("ext4", map[string]string{"blocksize": "-1"}); err == nil {
		t.Fatal("negative block size: no error")
	}
	if _, err := mkfsOptions("btrfs", nil); err == nil {
		t.Fatal("btrfs: no error")
	}
}

func topo(zone string) *csi.Topology {
	return &csi.Topology{Segments: map[string]string{TopologyKeyZone: zone}}
}

func TestPickZone(t *testing.T) {
	wk := func(z string) *csi.Topology {
		return &csi.Topology{Segments: map[string]string{TopologyKeyWellKnown: z}}
	}
	tests := []struct {
		name    string
		req     *csi.TopologyRequirement
		want    string
		wantErr bool
	}{
		{"none", nil, "", false},
		{"requisite only", &csi.TopologyRequirement{Requisite: []*csi.Topology{topo("b"), topo("c")}}, "b", false},
		{"preferred first", &csi.TopologyRequirement{Requisite: []*csi.Topology{topo("b"), topo("c")}, Preferred: []*csi.Topology{topo("c"), topo("b")}}, "c", false},
		{"preferred outside requisite skipped", &csi.TopologyRequirement{Requisite: []*csi.Topology{topo("b")}, Preferred: []*csi.Topology{topo("a")}}, "b", false},
		{"well-known key", &csi.TopologyRequirement{Preferred: []*csi.Topology{wk("a")}}, "a", false},
		{"unknown key", &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: map[string]string{"rack": "r1"}}}}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pickZone(tt.req)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("pickZone = %q, %v; want %q, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
	if zoneAllowed(&csi.TopologyRequirement{Requisite: []*csi.Topology{topo("a")}}, "b") {
		t.Error("zone b allowed by requisite a")
	}
	if !zoneAllowed(nil, "b") {
		t.Error("zone b refused with no requirement")
	}
}

func TestNextDeviceName(t *testing.T) {
	got, _ := nextDeviceName(nil)
	if got != "/dev/xvdba" {
		t.Fatalf("first name %s, want /dev/xvdba", got)
	}
	got, _ = nextDeviceName(map[string]bool{"/dev/xvdba": true, "/dev/xvdbb": true, "/dev/xvda": true})
	if got != "/dev/xvdbc" {
		t.Fatalf("next name %s, want /dev/xvdbc", got)
	}
	all := map[string]bool{}
	for a := 'a'; a <= 'z'; a++ {
		for b := 'a'; b <= 'z'; b++ {
			all["/dev/xvd"+string(a)+string(b)] = true
		}
	}
	if _, err := nextDeviceName(all); err == nil {
		t.Fatal("no error when all names are in use")
	}
}

func TestMaxVolumesPerNode(t *testing.T) {
	tests := []struct {
		typ              string
		override, reserv int64
		want             int64
	}{
		{"m5.large", 0, 0, 26},
		{"t2.micro", 0, 0, 39},
		{"m5.large", 10, 0, 10},
		{"m5.large", 0, 6, 20},
		{"m5.large", 0, 100, 1},
	}
	for _, tt := range tests {
		if got := maxVolumesPerNode(tt.typ, tt.override, tt.reserv); got != tt.want {
			t.Errorf("maxVolumesPerNode(%s, %d, %d) = %d, want %d", tt.typ, tt.override, tt.reserv, got, tt.want)
		}
	}
}

func TestCheckCapability(t *testing.T) {
	mount := func(m csi.VolumeCapability_AccessMode_Mode, fs string) *csi.VolumeCapability {
		return &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: m},
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fs}}}
	}
	block := func(m csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
		return &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: m},
			AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}}
	}
	ok := []*csi.VolumeCapability{
		mount(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, ""),
		mount(csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY, "xfs"),
		block(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER),
	}
	bad := []*csi.VolumeCapability{
		nil,
		mount(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, "ext4"),
		mount(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, "ntfs"),
		{AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}},
		{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}},
	}
	for _, c := range ok {
		if err := checkCapability(c); err != nil {
			t.Errorf("checkCapability(%v) = %v", c, err)
		}
	}
	for _, c := range bad {
		if err := checkCapability(c); err == nil {
			t.Errorf("checkCapability(%v) accepted", c)
		}
	}
}

func TestStripSecrets(t *testing.T) {
	req := &csi.NodeStageVolumeRequest{
		VolumeId: "vol-1",
		Secrets:  map[string]string{"password": "hunter2"},
	}
	out := stripSecrets(req)
	if strings.Contains(out, "hunter2") {
		t.Fatalf("secret in log text: %s", out)
	}
	if !strings.Contains(out, "vol-1") || !strings.Contains(out, secretMarker) {
		t.Fatalf("log text lost the volume id or the marker: %s", out)
	}
	if req.Secrets["password"] != "hunter2" {
		t.Fatal("stripSecrets changed the request")
	}
	create := &csi.CreateVolumeRequest{Name: "v", Secrets: map[string]string{"k": "topsecret"}}
	if s := stripSecrets(create); strings.Contains(s, "topsecret") {
		t.Fatalf("secret in log text: %s", s)
	}
}

func TestListToken(t *testing.T) {
	tok := listToken{Cloud: "17", Skip: 3}
	got, err := decodeListToken(tok.encode())
	if err != nil || got != tok {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, bad := range []string{"invalid-token", "!!", "e30x"} {
		if _, err := decodeListToken(bad); err == nil {
			t.Errorf("token %q accepted", bad)
		}
	}
}

func TestInflight(t *testing.T) {
	i := newInflight()
	if !i.tryLock("vol-1") {
		t.Fatal("first lock refused")
	}
	if i.tryLock("vol-1") {
		t.Fatal("second lock on the same key granted")
	}
	if !i.tryLock("vol-2") {
		t.Fatal("lock on another key refused")
	}
	i.unlock("vol-1")
	if !i.tryLock("vol-1") {
		t.Fatal("lock after unlock refused")
	}
}

func TestProbeFS(t *testing.T) {
	ext := func(compat, incompat uint32) []byte {
		b := make([]byte, 2048)
		b[1080], b[1081] = 0x53, 0xEF
		put := func(off int, v uint32) {
			b[off], b[off+1], b[off+2], b[off+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		}
		put(1024+0x5C, compat)
		put(1024+0x60, incompat)
		return b
	}
	xfs := make([]byte, 2048)
	copy(xfs, "XFSB")
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"zeros", make([]byte, 2048), ""},
		{"short", []byte("XF"), ""},
		{"xfs", xfs, "xfs"},
		{"ext2", ext(0, 0), "ext2"},
		{"ext3", ext(0x4, 0), "ext3"},
		{"ext4 extents", ext(0x4, 0x40), "ext4"},
		{"ext4 flex_bg", ext(0x4, 0x200), "ext4"},
	}
	for _, tt := range tests {
		if got := probeFS(tt.b); got != tt.want {
			t.Errorf("%s: probeFS = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestSystemMounterGetDiskFormat makes real filesystems in files (no root needed)
// and reads them back.
func TestSystemMounterGetDiskFormat(t *testing.T) {
	m := NewSystemMounter()
	for _, fs := range []string{"ext4", "ext3", "xfs"} {
		tool, err := exec.LookPath("mkfs." + fs)
		if err != nil {
			t.Skipf("no mkfs.%s (hack/setup.sh installs it)", fs)
		}
		img := filepath.Join(t.TempDir(), fs+".img")
		if err := os.WriteFile(img, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(img, 512<<20); err != nil {
			t.Fatal(err)
		}
		if got, err := m.GetDiskFormat(img); err != nil || got != "" {
			t.Fatalf("blank file: %q, %v", got, err)
		}
		args := []string{"-F", img}
		if fs == "xfs" {
			args = []string{"-f", img}
		}
		if out, err := exec.Command(tool, args...).CombinedOutput(); err != nil {
			t.Fatalf("mkfs.%s: %v: %s", fs, err, out)
		}
		if got, err := m.GetDiskFormat(img); err != nil || got != fs {
			t.Fatalf("%s image probed as %q, %v", fs, got, err)
		}
	}
}
