package driver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	mount "k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"

	"github.com/kubelab/kubelab/internal/testutil"
)

func TestParseBlkidVersion(t *testing.T) {
	tests := []struct {
		out     string
		want    blkidVersion
		text    string
		wantErr bool
		inRange bool
	}{
		{out: "blkid from util-linux 2.38.1  (libblkid 2.38.1, 04-Aug-2022)\n", want: blkidVersion{2, 38}, text: "2.38.1", inRange: true},
		{out: "blkid from util-linux 2.39.3  (libblkid 2.39.3, 04-Dec-2023)", want: blkidVersion{2, 39}, text: "2.39.3", inRange: true},
		{out: "blkid from util-linux 2.41  (libblkid 2.41.0, 17-Mar-2025)", want: blkidVersion{2, 41}, text: "2.41.0", inRange: true},
		{out: "blkid from util-linux 2.40-rc1  (libblkid 2.40.0, 27-Mar-2024)", want: blkidVersion{2, 40}, text: "2.40.0", inRange: true},
		// The library probes: its release counts over the program's.
		{out: "blkid from util-linux 2.38.1  (libblkid 2.42.0, 01-Jan-2026)", want: blkidVersion{2, 42}, text: "2.42.0"},
		{out: "blkid from util-linux 2.41.2  (libblkid 2.37.2, 16-Aug-2021)", want: blkidVersion{2, 37}, text: "2.37.2"},
		// No library part: the util-linux release.
		{out: "blkid from util-linux 2.39.1", want: blkidVersion{2, 39}, text: "2.39.1", inRange: true},
		{out: "blkid from util-linux 2.42-rc2", want: blkidVersion{2, 42}, text: "2.42-rc2"},
		{out: "blkid from util-linux 2.37.2  (libblkid 2.37.2, 16-Aug-2021)", want: blkidVersion{2, 37}, text: "2.37.2"},
		{out: "blkid from util-linux 3.0.0  (libblkid 3.0.0, 01-Jan-2030)", want: blkidVersion{3, 0}, text: "3.0.0"},
		{out: "blkid from util-linux 1.99  (libblkid 1.99.0, 01-Jan-2000)", want: blkidVersion{1, 99}, text: "1.99.0"},
		{out: "", wantErr: true},
		{out: "BusyBox v1.36.1 (Debian 1:1.36.1-9) multi-call binary.", wantErr: true},
		{out: "blkid: unrecognized option '--version'", wantErr: true},
		{out: "blkid from util-linux two.thirty-eight", wantErr: true},
		{out: "blkid from util-linux 2.99999999999999999999", wantErr: true},
		{out: "utilities-linux 2.38.1", wantErr: true},
	}
	for _, tt := range tests {
		v, text, err := parseBlkidVersion(tt.out)
		if tt.wantErr {
			if err == nil {
				t.Errorf("%q: got %v (%q), want an error", tt.out, v, text)
			}
			continue
		}
		if err != nil || v != tt.want || text != tt.text {
			t.Errorf("%q: got %v %q, %v; want %v %q", tt.out, v, text, err, tt.want, tt.text)
		}
		if in := !v.less(windowsFrom) && !windowsTo.less(v); in != tt.inRange {
			t.Errorf("%q: %v within %v to %v = %v, want %v", tt.out, v, windowsFrom, windowsTo, in, tt.inRange)
		}
	}
}

// recordingExec runs commands as utilexec.New does and records each one.
type recordingExec struct {
	utilexec.Interface
	mu   sync.Mutex
	cmds [][]string
}

func newRecordingExec() *recordingExec { return &recordingExec{Interface: utilexec.New()} }

func (r *recordingExec) record(cmd string, args []string) {
	r.mu.Lock()
	r.cmds = append(r.cmds, append([]string{cmd}, args...))
	r.mu.Unlock()
}

func (r *recordingExec) Command(cmd string, args ...string) utilexec.Cmd {
	r.record(cmd, args)
	return r.Interface.Command(cmd, args...)
}

func (r *recordingExec) CommandContext(ctx context.Context, cmd string, args ...string) utilexec.Cmd {
	r.record(cmd, args)
	return r.Interface.CommandContext(ctx, cmd, args...)
}

// ran returns the commands recorded so far that name arg (any argument), as
// program names.
func (r *recordingExec) ran(arg string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.cmds {
		if slices.Contains(c[1:], arg) {
			out = append(out, c[0])
		}
	}
	return out
}

// all returns the program names of every command recorded so far.
func (r *recordingExec) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.cmds {
		out = append(out, c[0])
	}
	return out
}

func requireTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (hack/setup.sh installs it)", tool)
		}
	}
}

// fakeBlkidVersion puts first on PATH a blkid that prints version for --version
// and hands anything else to the real blkid.
func fakeBlkidVersion(t *testing.T, version string) {
	t.Helper()
	real, err := exec.LookPath("blkid")
	if err != nil {
		t.Skip("needs blkid (hack/setup.sh installs it)")
	}
	bin := t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\nif [ \"$1\" = --version ]; then echo '%s'; exit 0; fi\nexec %s \"$@\"\n", version, real)
	if err := os.WriteFile(filepath.Join(bin, "blkid"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// TestBlankFastPathInstalled makes the decision the driver makes at start-up,
// with the blkid and mkfs of this machine: on when its libblkid is one the
// windows were checked against (the self-check passing for ext4 and xfs), off
// otherwise; its temporary image is gone afterwards.
func TestBlankFastPathInstalled(t *testing.T) {
	requireTools(t, "blkid", "mkfs.ext4", "mkfs.xfs")
	out, err := exec.Command("blkid", "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("blkid --version: %v: %s", err, out)
	}
	v, _, err := parseBlkidVersion(string(out))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fp := checkBlankFastPath(context.Background(), utilexec.New(), dir, signatureWindows)
	t.Logf("installed %s: enabled=%v reason=%q took %v", strings.TrimSpace(string(out)), fp.Enabled, fp.Reason, fp.Took)
	want := !v.less(windowsFrom) && !windowsTo.less(v)
	if fp.Enabled != want {
		t.Fatalf("enabled = %v (%s), want %v for libblkid %v", fp.Enabled, fp.Reason, want, v)
	}
	if want && !strings.Contains(fp.Reason, "ext4, xfs") {
		t.Fatalf("reason %q: want the self-check of ext4 and xfs", fp.Reason)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the self-check left %v", left)
	}
}

// TestBlankFastPathOff: no blkid, an unknown one, or one outside the checked
// releases turns the fast path off, before any self-check runs; a self-check
// that finds a signature outside the windows turns it off too.
func TestBlankFastPathOff(t *testing.T) {
	requireTools(t, "blkid", "mkfs.ext4", "mkfs.xfs")
	t.Run("no blkid", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		rec := newRecordingExec()
		fp := checkBlankFastPath(context.Background(), rec, t.TempDir(), signatureWindows)
		if fp.Enabled || !strings.Contains(fp.Reason, "blkid --version") {
			t.Fatalf("decision %+v: want off for want of blkid", fp)
		}
		if got := rec.all(); !slices.Equal(got, []string{"blkid"}) {
			t.Fatalf("ran %v, want only the version query", got)
		}
	})
	for _, version := range []string{
		"blkid from util-linux 2.37.2  (libblkid 2.37.2, 16-Aug-2021)",
		"blkid from util-linux 2.42.0  (libblkid 2.42.0, 01-Jan-2026)",
		"blkid from util-linux 2.38.1  (libblkid 2.42.0, 01-Jan-2026)",
		"BusyBox v1.36.1 (Debian 1:1.36.1-9) multi-call binary.",
	} {
		t.Run(version, func(t *testing.T) {
			fakeBlkidVersion(t, version)
			rec := newRecordingExec()
			fp := checkBlankFastPath(context.Background(), rec, t.TempDir(), signatureWindows)
			if fp.Enabled {
				t.Fatalf("decision %+v: want off", fp)
			}
			if got := rec.all(); !slices.Equal(got, []string{"blkid"}) {
				t.Fatalf("ran %v, want only the version query", got)
			}
			t.Logf("reason: %s", fp.Reason)
		})
	}
	t.Run("self-check finds a signature outside the windows", func(t *testing.T) {
		fakeBlkidVersion(t, "blkid from util-linux 2.38.1  (libblkid 2.38.1, 04-Aug-2022)")
		// Windows that leave out the first 516 KiB, where ext4's and xfs' magic is.
		short := func(size int64) []window { return signatureWindows(size)[1:] }
		dir := t.TempDir()
		fp := checkBlankFastPath(context.Background(), newRecordingExec(), dir, short)
		if fp.Enabled || !strings.Contains(fp.Reason, "outside the windows") {
			t.Fatalf("decision %+v: want off, the signature outside the windows", fp)
		}
		t.Logf("reason: %s", fp.Reason)
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Fatalf("the self-check left %v", left)
		}
	})
}

// fakeMountMounter is a SystemMounter whose commands (blkid, mkfs) are real and
// recorded and whose mounts are only recorded, with the fast path decided once
// by checkBlankFastPath against the blkid on PATH.
func fakeMountMounter(t *testing.T) (*SystemMounter, *recordingExec, *mount.FakeMounter) {
	rec := newRecordingExec()
	fm := mount.NewFakeMounter(nil)
	dir := t.TempDir()
	return &SystemMounter{
		sfm:    &mount.SafeFormatAndMount{Interface: fm, Exec: rec},
		resize: mount.NewResizeFs(rec),
		fastPath: sync.OnceValue(func() BlankFastPath {
			return checkBlankFastPath(context.Background(), rec, dir, signatureWindows)
		}),
	}, rec, fm
}

// TestFormatAndMountPathByBlkidVersion formats a blank image through
// FormatAndMount on a node whose blkid reports a release outside the checked
// ones: blkid decides (mount-utils' path: blkid -p on the device, then mkfs).
// With a release inside them the same call formats without blkid. Mounts are
// recorded, not made: no root needed.
func TestFormatAndMountPathByBlkidVersion(t *testing.T) {
	requireTools(t, "blkid", "mkfs.ext4", "mkfs.xfs")
	tests := []struct {
		version string
		fast    bool
		want    []string // the commands run on the device
	}{
		{"blkid from util-linux 2.42.0  (libblkid 2.42.0, 01-Jan-2026)", false, []string{"blkid", "mkfs.ext4"}},
		{"blkid from util-linux 2.37.2  (libblkid 2.37.2, 16-Aug-2021)", false, []string{"blkid", "mkfs.ext4"}},
		{"blkid from util-linux 2.38.1  (libblkid 2.38.1, 04-Aug-2022)", true, []string{"mkfs.ext4"}},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			fakeBlkidVersion(t, tt.version)
			m, rec, fm := fakeMountMounter(t)
			img := sparseImage(t, t.TempDir(), "vol.img", GiB)
			target := filepath.Join(t.TempDir(), "mnt")
			if err := m.FormatAndMount(img, target, "ext4", nil, nil); err != nil {
				t.Fatal(err)
			}
			if fp := m.BlankFastPath(); fp.Enabled != tt.fast {
				t.Fatalf("fast path %+v, want enabled=%v", fp, tt.fast)
			}
			if got := rec.ran(img); !slices.Equal(got, tt.want) {
				t.Fatalf("on the device ran %v, want %v", got, tt.want)
			}
			if got := blkidFinds(t, img); !strings.Contains(got, "TYPE=ext4") {
				t.Fatalf("after FormatAndMount blkid finds %q, want ext4", got)
			}
			if log := fm.GetLog(); len(log) != 1 || log[0].Source != img || log[0].Target != target || log[0].FSType != "ext4" {
				t.Fatalf("mounts %+v, want %s at %s", log, img, target)
			}
		})
	}
}

// fixedFastPath is a fast path decision made by the test.
func fixedFastPath(on bool) func() BlankFastPath {
	return func() BlankFastPath { return BlankFastPath{Enabled: on, Reason: "set by the test"} }
}

// realMounter is the real SystemMounter with its commands recorded and the fast
// path on or off.
func realMounter(on bool) (*SystemMounter, *recordingExec) {
	rec := newRecordingExec()
	return &SystemMounter{
		sfm:      mount.NewSafeFormatAndMount(mount.New(""), rec),
		resize:   mount.NewResizeFs(rec),
		fastPath: fixedFastPath(on),
	}, rec
}

// outsideWindows reports whether [off, off+n) misses every signature window of a
// device of size bytes.
func outsideWindows(size, off, n int64) bool {
	for _, w := range signatureWindows(size) {
		if off < w.off+w.len && w.off < off+n {
			return false
		}
	}
	return true
}

// TestBlankFastPathAgreesWithBlkidReal puts on loop devices what no signature
// marks: bytes outside every window, ext4 and xfs filesystems whose first window
// (primary superblock included) was zeroed, and an ext4 whose magic wipefs -a
// erased (the rest of its superblock still in the first window). For each it
// logs what the windows read and what `blkid -p` finds, and asserts the windows
// never read blank where blkid finds something. The behaviour chosen for all of
// them is blkid's, the one mount-utils has: no signature means blank, so
// FormatAndMount formats, with the fast path on and with it off alike (each on a
// fresh copy of the device); the fast path skips blkid only where the windows
// read blank.
func TestBlankFastPathAgreesWithBlkidReal(t *testing.T) {
	testutil.RequireRoot(t, realModeTools...)
	tests := []struct {
		name string
		size int64
		// at and n place the test's bytes (none when n is 0), checked to miss
		// every window; mkfs, when set, makes that filesystem first.
		at, n int64
		mkfs  string
		// wipefs erases the filesystem's magic with wipefs -a instead of zeroing
		// the first window.
		wipefs bool
		// windowsBlank is what deviceBlank must say, nil when either answer is safe
		// (blkid decides when the windows are not blank).
		windowsBlank *bool
	}{
		{name: "64 KiB at 8 MiB into 64 MiB", size: 64 * mib, at: 8 * mib, n: 64 * kib, windowsBlank: ptr(true)},
		{name: "just past the first window up to the next", size: 64 * mib, at: 516 * kib, n: mib - 516*kib, windowsBlank: ptr(true)},
		{name: "between the tail windows of 1 GiB", size: GiB, at: GiB - 768*kib, n: 64 * kib, windowsBlank: ptr(true)},
		{name: "ext4, first window zeroed", size: GiB, mkfs: "ext4"},
		{name: "xfs, first window zeroed", size: GiB, mkfs: "xfs"},
		{name: "ext4 after wipefs -a", size: GiB, mkfs: "ext4", wipefs: true, windowsBlank: ptr(false)},
	}
	pattern := []byte(strings.Repeat("kubelab user data, no signature. ", int(mib)/32))
	prep := func(t *testing.T, img string, size, at, n int64, fs string, wipefs bool) {
		switch fs {
		case "ext4":
			runTool(t, "mkfs.ext4", "-F", "-q", img)
		case "xfs":
			runTool(t, "mkfs.xfs", "-f", "-q", img)
		}
		switch {
		case wipefs:
			runTool(t, "wipefs", "-a", "-q", img)
		case fs != "":
			writeAt(t, img, 0, make([]byte, signatureWindows(size)[0].len))
		}
		if n > 0 {
			writeAt(t, img, at, pattern[:n])
		}
	}
	root := shortDir(t)
	cleanupMounts(t, root)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.n > 0 && !outsideWindows(tt.size, tt.at, tt.n) {
				t.Fatalf("the data at %d touches a signature window", tt.at)
			}
			for _, on := range []bool{true, false} {
				dir := filepath.Join(root, fmt.Sprintf("case%d-%v", i, on))
				if err := os.Mkdir(dir, 0o750); err != nil {
					t.Fatal(err)
				}
				img := sparseImage(t, dir, "vol.img", tt.size)
				prep(t, img, tt.size, tt.at, tt.n, tt.mkfs, tt.wipefs)
				dev := loopDevice(t, img)
				windowsBlank, err := deviceBlank(dev)
				if err != nil {
					t.Fatal(err)
				}
				found := blkidFinds(t, dev)
				if on {
					t.Logf("windows read blank: %v; blkid -p finds %q", windowsBlank, found)
				}
				if windowsBlank && found != "" {
					t.Fatalf("the windows read blank but blkid finds %q: the fast path would format a device blkid protects", found)
				}
				if found != "" {
					t.Fatalf("blkid finds %q: the case is meant to have no signature", found)
				}
				if tt.windowsBlank != nil && windowsBlank != *tt.windowsBlank {
					t.Fatalf("windows read blank = %v, want %v", windowsBlank, *tt.windowsBlank)
				}
				m, rec := realMounter(on)
				target := filepath.Join(dir, "mnt")
				if err := os.Mkdir(target, 0o750); err != nil {
					t.Fatal(err)
				}
				if err := m.FormatAndMount(dev, target, "ext4", nil, nil); err != nil {
					t.Fatalf("fast path %v: FormatAndMount: %v", on, err)
				}
				ran := rec.ran(dev)
				t.Logf("fast path %v: ran %v on the device", on, ran)
				if got := fsTypeAt(t, target); got != "ext4" {
					t.Fatalf("fast path %v: mounted %q, want a new ext4", on, got)
				}
				if !slices.Contains(ran, "mkfs.ext4") {
					t.Fatalf("fast path %v: ran %v, want mkfs.ext4", on, ran)
				}
				if viaBlkid := slices.Contains(ran, "blkid"); viaBlkid != (!on || !windowsBlank) {
					t.Fatalf("fast path %v, windows blank %v: blkid ran = %v", on, windowsBlank, viaBlkid)
				}
				if err := m.Unmount(target); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestNodeStageKeepsExt4DataReal stages, unstages and stages again a device that
// holds an ext4 filesystem with a file, with the fast path as this machine
// decides it, forced on and forced off: the file and what was written while
// staged are there every time and the filesystem keeps its UUID.
func TestNodeStageKeepsExt4DataReal(t *testing.T) {
	testutil.RequireRoot(t, realModeTools...)
	modes := []struct {
		name     string
		fastPath func() BlankFastPath
	}{
		{"installed decision", installedBlankFastPath},
		{"fast path on", fixedFastPath(true)},
		{"fast path off", fixedFastPath(false)},
	}
	for i, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			root := shortDir(t)
			cleanupMounts(t, root)
			devDir := filepath.Join(root, "dev")
			src := filepath.Join(root, "src")
			for _, d := range []string{devDir, src} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(src, "keep.txt"), []byte("precious"), 0o644); err != nil {
				t.Fatal(err)
			}
			img := sparseImage(t, root, "vol.img", GiB)
			runTool(t, "mkfs.ext4", "-F", "-q", "-d", src, img)
			dev := loopDevice(t, img)
			uuid := blkidValue(t, dev, "UUID")
			if uuid == "" {
				t.Fatal("no ext4 UUID on the device")
			}
			name := fmt.Sprintf("xvdk%c", 'a'+i)
			if err := os.Symlink(dev, filepath.Join(devDir, name)); err != nil {
				t.Fatal(err)
			}
			m := NewSystemMounter()
			m.fastPath = mode.fastPath
			_, conn := StartDriver(t, Config{Mode: ModeNode, Endpoint: "unix://" + filepath.Join(root, "csi.sock"), DeviceDir: devDir},
				Deps{Metadata: StaticMetadata{InstanceID: "i-0123456789abcdef0", InstanceType: "m5.large", Region: "us-east-1", Zone: "us-east-1a"},
					Mounter: m, Devices: DeviceDir{Dir: devDir}})
			nodeC := csi.NewNodeClient(conn)
			volID := fmt.Sprintf("vol-0keep%012d", i)
			staging := filepath.Join(root, "globalmount")
			ctx := context.Background()
			for round := 0; round < 2; round++ {
				if _, err := nodeC.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
					VolumeId: volID, StagingTargetPath: staging, VolumeCapability: mountCap("ext4"),
					PublishContext: map[string]string{DevicePathKey: "/dev/" + name},
				}); err != nil {
					t.Fatalf("stage %d: %v", round, err)
				}
				if got, err := os.ReadFile(filepath.Join(staging, "keep.txt")); err != nil || string(got) != "precious" {
					t.Fatalf("stage %d: keep.txt = %q, %v", round, got, err)
				}
				if round == 0 {
					if err := os.WriteFile(filepath.Join(staging, "written.txt"), []byte("while staged"), 0o644); err != nil {
						t.Fatal(err)
					}
				} else if got, err := os.ReadFile(filepath.Join(staging, "written.txt")); err != nil || string(got) != "while staged" {
					t.Fatalf("stage %d: written.txt = %q, %v", round, got, err)
				}
				if _, err := nodeC.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: volID, StagingTargetPath: staging}); err != nil {
					t.Fatalf("unstage %d: %v", round, err)
				}
				if got := blkidValue(t, dev, "UUID"); got != uuid {
					t.Fatalf("after round %d the UUID is %q, was %q: the device was formatted", round, got, uuid)
				}
			}
		})
	}
}
