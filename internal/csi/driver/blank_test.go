package driver

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kubelab/kubelab/internal/testutil"
)

func TestSignatureWindows(t *testing.T) {
	tests := []struct {
		name string
		size int64
		want []window
	}{
		{"empty", 0, nil},
		{"one sector", 512, []window{{0, 512}}},
		{"smaller than the head", 512 * kib, []window{{0, 512 * kib}}},
		{"head and tail overlap", mib, []window{{0, mib}}},
		{"3 MiB: no 4 MiB window", 3 * mib, []window{{0, 516 * kib}, {mib, 4 * kib}, {1564672, 4 * kib}, {2*mib - 4*kib, 8 * kib}, {2*mib + 512*kib, 512 * kib}}},
		{"1 GiB", GiB, []window{
			{0, 516 * kib},
			{mib, 4 * kib},
			{2 * mib, 4 * kib},
			{4 * mib, 4 * kib},
			{GiB - 3087*512 - (GiB-3087*512)%(4*kib), 4 * kib},
			{GiB - mib - 4*kib, 8 * kib},
			{GiB - 512*kib, 512 * kib},
		}},
		{"size off the 256 KiB grid", GiB + 100*kib, []window{
			{0, 516 * kib},
			{mib, 4 * kib},
			{2 * mib, 4 * kib},
			{4 * mib, 4 * kib},
			{GiB + 100*kib - 3087*512 - (GiB+100*kib-3087*512)%(4*kib), 4 * kib},
			{GiB + 100*kib - mib - 4*kib, 8 * kib},
			{GiB - 512*kib, 612 * kib},
		}},
		{"end off the 4 KiB grid", GiB + 512, []window{
			{0, 516 * kib},
			{mib, 4 * kib},
			{2 * mib, 4 * kib},
			{4 * mib, 4 * kib},
			{GiB - 3087*512 - (GiB-3087*512)%(4*kib), 4 * kib},
			{GiB - mib - 4*kib, 12 * kib},
			{GiB - 512*kib, 512*kib + 512},
		}},
	}
	for _, tt := range tests {
		if got := signatureWindows(tt.size); !slices.Equal(got, tt.want) {
			t.Errorf("%s: signatureWindows(%d) = %v, want %v", tt.name, tt.size, got, tt.want)
		}
	}
}

func TestAllZero(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 4096} {
		b := make([]byte, n)
		if !allZero(b) {
			t.Errorf("%d zero bytes: not zero", n)
		}
		for i := range b {
			b[i] = 1
			if allZero(b) {
				t.Errorf("%d bytes with byte %d set: zero", n, i)
			}
			b[i] = 0
		}
	}
}

func TestMkfsArgs(t *testing.T) {
	tests := []struct {
		fs   string
		opts []string
		want []string
	}{
		{"ext4", nil, []string{"-F", "-m0", "/dev/x"}},
		{"ext3", []string{"-b", "4096"}, []string{"-b", "4096", "-F", "-m0", "/dev/x"}},
		{"ext2", []string{"-I", "512"}, []string{"-I", "512", "/dev/x"}},
		{"xfs", []string{"-i", "size=512"}, []string{"-i", "size=512", "-f", "/dev/x"}},
	}
	for _, tt := range tests {
		if got := mkfsArgs(tt.fs, "/dev/x", tt.opts); !slices.Equal(got, tt.want) {
			t.Errorf("mkfsArgs(%s, %v) = %v, want %v", tt.fs, tt.opts, got, tt.want)
		}
	}
}

// signature is a way to put something blkid recognises on a device (or image) of
// size bytes.
type signature struct {
	name string
	make func(t *testing.T, path string, size int64)
}

func runTool(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
}

func writeAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// mbr is a DOS partition table with one Linux partition from sector 2048 on.
func mbr() []byte {
	b := make([]byte, 512)
	e := b[446:]
	e[4] = 0x83
	binary.LittleEndian.PutUint32(e[8:], 2048)
	binary.LittleEndian.PutUint32(e[12:], 204800)
	b[510], b[511] = 0x55, 0xAA
	return b
}

// md090 is an md 0.90 superblock (little endian, array of 1 MiB), which lives in the
// last 128 KiB of the device.
func md090(size int64) (int64, []byte) {
	b := make([]byte, 4096)
	le := binary.LittleEndian
	le.PutUint32(b[0:], 0xa92b4efc)
	le.PutUint32(b[8:], 90)
	le.PutUint32(b[20:], 0x11223344)
	le.PutUint32(b[32:], 1024)
	return size&^0xFFFF - 0x10000, b
}

var signatures = []signature{
	{"ext4", func(t *testing.T, p string, _ int64) { runTool(t, "mkfs.ext4", "-F", "-q", "-L", "keep", p) }},
	{"xfs", func(t *testing.T, p string, _ int64) { runTool(t, "mkfs.xfs", "-f", "-q", "-L", "keep", p) }},
	{"swap", func(t *testing.T, p string, _ int64) { runTool(t, "mkswap", p) }},
	{"mbr", func(t *testing.T, p string, _ int64) { writeAt(t, p, 0, mbr()) }},
	{"md 0.90 at the end", func(t *testing.T, p string, size int64) {
		off, b := md090(size)
		writeAt(t, p, off, b)
	}},
	{"promise 3087 sectors before the end", func(t *testing.T, p string, size int64) {
		writeAt(t, p, (size/512-3087)*512, []byte("Promise Technology, Inc."))
	}},
	{"vmfs at 2 MiB", func(t *testing.T, p string, _ int64) { writeAt(t, p, 2*mib, []byte{0x5e, 0xf1, 0xab, 0x2f}) }},
	{"luks2 secondary header at 1 MiB", func(t *testing.T, p string, _ int64) { writeAt(t, p, mib, luks2Secondary(mib)) }},
	{"luks2 secondary header at 4 MiB", func(t *testing.T, p string, _ int64) { writeAt(t, p, 4*mib, luks2Secondary(4*mib)) }},
	{"gpt", func(t *testing.T, p string, size int64) {
		pmbr, primary, entries := gpt(size)
		writeAt(t, p, 0, pmbr)
		writeAt(t, p, 512, primary)
		writeAt(t, p, 1024, entries)
	}},
	{"ufs at 256 KiB", func(t *testing.T, p string, _ int64) {
		b := make([]byte, 4)
		binary.LittleEndian.PutUint32(b, 0x00011954)
		writeAt(t, p, 256*kib+0x55c, b)
	}},
}

// gpt is an empty GUID partition table for a device of size bytes (512-byte
// sectors): the protective MBR, the primary header and its 128 entries.
func gpt(size int64) (pmbr, header, entries []byte) {
	le := binary.LittleEndian
	last := uint64(size/512 - 1)
	pmbr = make([]byte, 512)
	pmbr[446+4] = 0xEE
	le.PutUint32(pmbr[446+8:], 1)
	le.PutUint32(pmbr[446+12:], uint32(min(last, 0xFFFFFFFF)))
	pmbr[510], pmbr[511] = 0x55, 0xAA
	entries = make([]byte, 128*128)
	header = make([]byte, 512)
	copy(header, "EFI PART")
	le.PutUint32(header[8:], 0x00010000)
	le.PutUint32(header[12:], 92)
	le.PutUint64(header[24:], 1)
	le.PutUint64(header[32:], last)
	le.PutUint64(header[40:], 34)
	le.PutUint64(header[48:], last-33)
	copy(header[56:72], "kubelab-gpt-test")
	le.PutUint64(header[72:], 2)
	le.PutUint32(header[80:], 128)
	le.PutUint32(header[84:], 128)
	le.PutUint32(header[88:], crc32.ChecksumIEEE(entries))
	le.PutUint32(header[16:], crc32.ChecksumIEEE(header[:92]))
	return pmbr, header, entries
}

// luks2Secondary is the start of a LUKS2 secondary header that says it sits at off.
func luks2Secondary(off int64) []byte {
	b := make([]byte, 512)
	copy(b, "SKUL\xba\xbe")
	binary.BigEndian.PutUint16(b[6:], 2)
	binary.BigEndian.PutUint64(b[256:], uint64(off))
	return b
}

// blkidFinds is what `blkid -p` (as mount-utils runs it) reports on path, "" for nothing.
func blkidFinds(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("blkid", "-p", "-s", "TYPE", "-s", "PTTYPE", "-o", "export", path).CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 2 {
			return ""
		}
		t.Fatalf("blkid %s: %v: %s", path, err, out)
	}
	return strings.TrimSpace(string(out))
}

func sparseImage(t *testing.T, dir, name string, size int64) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSignatureWindowsCoverBlkid checks the claim blank.go rests on, with the blkid
// mount-utils runs: for each signature, blkid finds it and deviceBlank says "not
// blank"; with every signature window zeroed again, blkid finds nothing. So a
// device whose windows are zero is one blkid calls unformatted. Images are files
// (blkid probes them as whole disks); no root needed.
func TestSignatureWindowsCoverBlkid(t *testing.T) {
	requireTools(t, "blkid", "mkfs.ext4", "mkfs.xfs", "mkswap")
	dir := t.TempDir()
	const size = GiB
	img := sparseImage(t, dir, "blank.img", size)
	if got := blkidFinds(t, img); got != "" {
		t.Fatalf("blank image: blkid finds %q", got)
	}
	if blank, err := deviceBlank(img); err != nil || !blank {
		t.Fatalf("blank image: deviceBlank = %v, %v", blank, err)
	}
	for i, sig := range signatures {
		t.Run(sig.name, func(t *testing.T) {
			img := sparseImage(t, dir, fmt.Sprintf("sig-%d.img", i), size)
			sig.make(t, img, size)
			if got := blkidFinds(t, img); got == "" {
				t.Fatal("blkid finds nothing: the signature is not one")
			}
			if blank, err := deviceBlank(img); err != nil || blank {
				t.Fatalf("deviceBlank = %v, %v; want false", blank, err)
			}
			for _, w := range signatureWindows(size) {
				writeAt(t, img, w.off, make([]byte, w.len))
			}
			if got := blkidFinds(t, img); got != "" {
				t.Fatalf("with the signature windows zeroed blkid still finds %q: a window is missing", got)
			}
			if blank, err := deviceBlank(img); err != nil || !blank {
				t.Fatalf("zeroed windows: deviceBlank = %v, %v; want true", blank, err)
			}
		})
	}
}

// loopDevice attaches img to a free loop device until the test ends.
func loopDevice(t *testing.T, img string) string {
	t.Helper()
	out, err := exec.Command("losetup", "--find", "--show", img).Output()
	if err != nil {
		t.Fatalf("losetup %s: %v", img, err)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("cleanup: losetup -d %s: %v: %s", dev, err, out)
		}
	})
	return dev
}

func blkidValue(t *testing.T, dev, tag string) string {
	t.Helper()
	out, _ := exec.Command("blkid", "-p", "-s", tag, "-o", "value", dev).Output()
	return strings.TrimSpace(string(out))
}

// TestNodeStageFormatsOnlyBlankReal stages real loop devices through the node
// service: a blank device is formatted; one holding a filesystem is mounted as it
// is or refused, and one with a partition table or a RAID superblock only at its
// end is refused, each left as it was; a device with bytes only where no
// signature can be goes to blkid, finds nothing and is formatted.
func TestNodeStageFormatsOnlyBlankReal(t *testing.T) {
	testutil.RequireRoot(t, realModeTools...)
	root := shortDir(t)
	devDir := filepath.Join(root, "dev")
	if err := os.MkdirAll(devDir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, conn := StartDriver(t, Config{Mode: ModeNode, Endpoint: "unix://" + filepath.Join(root, "csi.sock"), DeviceDir: devDir},
		Deps{Metadata: StaticMetadata{InstanceID: "i-0123456789abcdef0", InstanceType: "m5.large", Region: "us-east-1", Zone: "us-east-1a"},
			Mounter: NewSystemMounter(), Devices: DeviceDir{Dir: devDir}})
	nodeC := csi.NewNodeClient(conn)
	const size = GiB
	tests := []struct {
		name string
		prep func(t *testing.T, img string)
		fs   string
		// code is the NodeStageVolume status; on OK, mounted is the filesystem found
		// at the staging path, and keep says whether the device's UUID must be the
		// one it had (not formatted).
		code    codes.Code
		mounted string
		keep    bool
	}{
		{"blank", nil, "ext4", codes.OK, "ext4", false},
		{"blank xfs", nil, "xfs", codes.OK, "xfs", false},
		{"ext4", signatures[0].make2(size), "ext4", codes.OK, "ext4", true},
		{"xfs", signatures[1].make2(size), "xfs", codes.OK, "xfs", true},
		{"xfs asked as ext4", signatures[1].make2(size), "ext4", codes.FailedPrecondition, "", true},
		{"mbr", signatures[3].make2(size), "ext4", codes.Internal, "", true},
		{"gpt", sig("gpt").make2(size), "ext4", codes.Internal, "", true},
		{"md 0.90 at the end", signatures[4].make2(size), "ext4", codes.Internal, "", true},
		{"junk in the middle and last sector", func(t *testing.T, img string) {
			writeAt(t, img, 512*mib, []byte("not a signature"))
			writeAt(t, img, size-512+100, []byte("nor this"))
		}, "ext4", codes.OK, "ext4", false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(root, fmt.Sprintf("case%d", i))
			if err := os.Mkdir(dir, 0o750); err != nil {
				t.Fatal(err)
			}
			img := sparseImage(t, dir, "vol.img", size)
			if tt.prep != nil {
				tt.prep(t, img)
			}
			dev := loopDevice(t, img)
			cleanupMounts(t, dir)
			name := fmt.Sprintf("xvdb%c", 'a'+i)
			if err := os.Symlink(dev, filepath.Join(devDir, name)); err != nil {
				t.Fatal(err)
			}
			before := readWindows(t, dev)
			uuid := blkidValue(t, dev, "UUID")
			found := blkidFinds(t, dev)
			volID := fmt.Sprintf("vol-0blank%07d", i)
			staging := filepath.Join(dir, "globalmount")
			_, err := nodeC.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{
				VolumeId: volID, StagingTargetPath: staging, VolumeCapability: mountCap(tt.fs),
				PublishContext: map[string]string{DevicePathKey: "/dev/" + name},
			})
			if status.Code(err) != tt.code {
				t.Fatalf("NodeStageVolume: %v, want code %s", err, tt.code)
			}
			if tt.code == codes.OK {
				if got := fsTypeAt(t, staging); got != tt.mounted {
					t.Fatalf("staging path holds %q, want %q", got, tt.mounted)
				}
				if _, err := nodeC.NodeUnstageVolume(context.Background(), &csi.NodeUnstageVolumeRequest{VolumeId: volID, StagingTargetPath: staging}); err != nil {
					t.Fatalf("NodeUnstageVolume: %v", err)
				}
			}
			switch got := blkidValue(t, dev, "UUID"); {
			case tt.keep && got != uuid:
				t.Fatalf("device UUID %q became %q: it was formatted", uuid, got)
			case !tt.keep && (got == "" || got == uuid):
				t.Fatalf("device UUID %q, was %q: it was not formatted", got, uuid)
			}
			if tt.keep && tt.code != codes.OK {
				if after := readWindows(t, dev); !slices.Equal(after, before) {
					t.Fatal("a refused device was written to")
				}
				if got := blkidFinds(t, dev); got != found {
					t.Fatalf("blkid finds %q, found %q before", got, found)
				}
			}
		})
	}
}

// sig is the signature called name.
func sig(name string) signature {
	for _, s := range signatures {
		if s.name == name {
			return s
		}
	}
	panic("no signature " + name)
}

// make2 adapts a signature maker to a table's prep step on an image of size bytes.
func (s signature) make2(size int64) func(t *testing.T, img string) {
	return func(t *testing.T, img string) { s.make(t, img, size) }
}

// readWindows returns the bytes of every signature window of dev, read through a
// fresh descriptor.
func readWindows(t *testing.T, dev string) []byte {
	t.Helper()
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size, err := f.Seek(0, 2)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, w := range signatureWindows(size) {
		b := make([]byte, w.len)
		if _, err := f.ReadAt(b, w.off); err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

// BenchmarkBlankCheck compares the in-process blankness test with the blkid run
// it replaces, on the same blank 1 GiB loop device.
func BenchmarkBlankCheck(b *testing.B) {
	testutil.RequireRoot(b, realModeTools...)
	dir := shortDir(b)
	img := filepath.Join(dir, "vol.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.Truncate(img, GiB); err != nil {
		b.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", img).Output()
	if err != nil {
		b.Fatal(err)
	}
	dev := strings.TrimSpace(string(out))
	b.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })
	b.Run("windows", func(b *testing.B) {
		for b.Loop() {
			if blank, err := deviceBlank(dev); err != nil || !blank {
				b.Fatalf("deviceBlank = %v, %v", blank, err)
			}
		}
	})
	b.Run("blkid", func(b *testing.B) {
		for b.Loop() {
			if out, err := exec.Command("blkid", "-p", "-s", "TYPE", "-s", "PTTYPE", "-o", "export", dev).CombinedOutput(); err == nil || len(out) != 0 {
				b.Fatalf("blkid: %v: %s", err, out)
			}
		}
	})
}
