package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	utilexec "k8s.io/utils/exec"
)

// BlankFastPath is a node's decision whether FormatAndMount may format a device
// whose signature windows are all zero without running blkid (blank.go).
type BlankFastPath struct {
	// Enabled is true when the installed libblkid is one the windows were checked
	// against and the self-check proved them against it.
	Enabled bool
	// Reason says why, for the log.
	Reason string
	// Version is the libblkid release found ("2.38.1"), "" when none was.
	Version string
	// Took is how long the decision took (blkid --version and the self-check).
	Took time.Duration
}

// The libblkid releases signatureWindows was checked against, inclusive.
var (
	windowsFrom = blkidVersion{2, 38}
	windowsTo   = blkidVersion{2, 41}
)

// blankCheckTimeout bounds the whole decision: every blkid and mkfs it runs.
const blankCheckTimeout = 20 * time.Second

// installedBlankFastPath is the decision for the blkid and mkfs on PATH, made on
// the first call and shared by every SystemMounter of the process.
var installedBlankFastPath = sync.OnceValue(func() BlankFastPath {
	ctx, cancel := context.WithTimeout(context.Background(), blankCheckTimeout)
	defer cancel()
	return checkBlankFastPath(ctx, utilexec.New(), os.TempDir(), signatureWindows)
})

// blkidVersion is a util-linux release, major and minor: 2.38.1 is {2, 38}.
type blkidVersion struct{ major, minor int }

func (v blkidVersion) less(w blkidVersion) bool {
	return v.major < w.major || v.major == w.major && v.minor < w.minor
}

func (v blkidVersion) String() string { return fmt.Sprintf("%d.%d", v.major, v.minor) }

var (
	libblkidRE  = regexp.MustCompile(`\blibblkid\s+(\d+)\.(\d+)((?:[.-][0-9A-Za-z]+)*)`)
	utilLinuxRE = regexp.MustCompile(`\butil-linux\s+(\d+)\.(\d+)((?:[.-][0-9A-Za-z]+)*)`)
)

// parseBlkidVersion reads the output of `blkid --version` ("blkid from util-linux
// 2.38.1  (libblkid 2.38.1, 04-Aug-2022)"). The libblkid release counts when it is
// there, since the library does the probing; else the util-linux one. It returns
// the release and its full text.
func parseBlkidVersion(out string) (blkidVersion, string, error) {
	m := libblkidRE.FindStringSubmatch(out)
	if m == nil {
		m = utilLinuxRE.FindStringSubmatch(out)
	}
	if m == nil {
		return blkidVersion{}, "", fmt.Errorf("no util-linux or libblkid release in %q", strings.TrimSpace(out))
	}
	major, err1 := strconv.Atoi(m[1])
	minor, err2 := strconv.Atoi(m[2])
	if err := errors.Join(err1, err2); err != nil {
		return blkidVersion{}, "", fmt.Errorf("release in %q: %w", strings.TrimSpace(out), err)
	}
	return blkidVersion{major, minor}, m[1] + "." + m[2] + m[3], nil
}

// checkBlankFastPath decides whether the in-process blankness test may stand in
// for the blkid that ex runs: blkid must report a libblkid release from windowsFrom
// to windowsTo, and proveWindows must pass in a temporary directory under dir.
// Anything else turns the fast path off.
func checkBlankFastPath(ctx context.Context, ex utilexec.Interface, dir string, windows func(int64) []window) BlankFastPath {
	start := time.Now()
	d := decideBlankFastPath(ctx, ex, dir, windows)
	d.Took = time.Since(start)
	return d
}

func decideBlankFastPath(ctx context.Context, ex utilexec.Interface, dir string, windows func(int64) []window) BlankFastPath {
	out, err := ex.CommandContext(ctx, "blkid", "--version").CombinedOutput()
	if err != nil {
		return BlankFastPath{Reason: fmt.Sprintf("blkid --version: %v: %s", err, strings.TrimSpace(string(out)))}
	}
	v, text, err := parseBlkidVersion(string(out))
	if err != nil {
		return BlankFastPath{Reason: fmt.Sprintf("blkid --version: %v", err)}
	}
	if v.less(windowsFrom) || windowsTo.less(v) {
		return BlankFastPath{Version: text, Reason: fmt.Sprintf("libblkid %s is not one of %s to %s, which the signature windows were checked against", text, windowsFrom, windowsTo)}
	}
	checked, err := proveWindows(ctx, ex, dir, windows)
	if err != nil {
		return BlankFastPath{Version: text, Reason: fmt.Sprintf("self-check against libblkid %s failed: %v", text, err)}
	}
	return BlankFastPath{Enabled: true, Version: text, Reason: fmt.Sprintf("libblkid %s; self-check passed for %s", text, strings.Join(checked, ", "))}
}

// proofSize is the size of the self-check's sparse image: a size where the
// windows are apart and mkfs lays filesystems out as on a volume.
const proofSize = GiB

// proveWindows checks windows against the blkid ex runs, on a sparse image in a
// temporary directory under dir: blkid finds nothing on the zero image and
// deviceBlank says blank; then, for each of ext4 and xfs whose mkfs is on PATH,
// made with the node's mkfs options, blkid finds that filesystem and deviceBlank
// says not blank, and once every window is zeroed blkid finds nothing. So the
// magic blkid knows these filesystems by lies inside the windows. It returns the
// filesystems checked; none is an error.
func proveWindows(ctx context.Context, ex utilexec.Interface, dir string, windows func(int64) []window) ([]string, error) {
	tmp, err := os.MkdirTemp(dir, "kubelab-blank-check-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	img := filepath.Join(tmp, "probe.img")
	fresh := func() error {
		if err := os.WriteFile(img, nil, 0o600); err != nil {
			return err
		}
		return os.Truncate(img, proofSize)
	}
	if err := fresh(); err != nil {
		return nil, err
	}
	if found, err := blkidProbe(ctx, ex, img); err != nil || found != "" {
		return nil, fmt.Errorf("zero image: blkid finds %q (%v)", found, err)
	}
	if blank, err := deviceBlank(img); err != nil || !blank {
		return nil, fmt.Errorf("zero image: blank = %v (%v)", blank, err)
	}
	var checked []string
	for _, fs := range []string{"ext4", "xfs"} {
		if _, err := ex.LookPath("mkfs." + fs); err != nil {
			continue
		}
		if err := fresh(); err != nil {
			return nil, err
		}
		if out, err := ex.CommandContext(ctx, "mkfs."+fs, mkfsArgs(fs, img, nil)...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("mkfs.%s: %w: %s", fs, err, strings.TrimSpace(string(out)))
		}
		if found, err := blkidProbe(ctx, ex, img); err != nil || found != fs {
			return nil, fmt.Errorf("%s image: blkid finds %q (%v)", fs, found, err)
		}
		if blank, err := deviceBlank(img); err != nil || blank {
			return nil, fmt.Errorf("%s image: the windows read blank = %v (%v)", fs, blank, err)
		}
		if err := zeroWindows(img, windows(proofSize)); err != nil {
			return nil, err
		}
		if found, err := blkidProbe(ctx, ex, img); err != nil || found != "" {
			return nil, fmt.Errorf("%s image with the signature windows zeroed: blkid finds %q (%v): the signature lies outside the windows", fs, found, err)
		}
		checked = append(checked, fs)
	}
	if len(checked) == 0 {
		return nil, errors.New("neither mkfs.ext4 nor mkfs.xfs to check with")
	}
	return checked, nil
}

// zeroWindows writes zeros over every window of the file at path.
func zeroWindows(path string, ws []window) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	var longest int64
	for _, w := range ws {
		longest = max(longest, w.len)
	}
	zero := make([]byte, longest)
	for _, w := range ws {
		if _, err := f.WriteAt(zero[:w.len], w.off); err != nil {
			f.Close()
			return fmt.Errorf("zero %s at %d: %w", path, w.off, err)
		}
	}
	return f.Close()
}

// blkidProbe runs blkid as mount-utils does (-p, TYPE and PTTYPE) on path and
// returns the type it finds, the partition table type when there is one, "" for
// nothing (exit status 2).
func blkidProbe(ctx context.Context, ex utilexec.Interface, path string) (string, error) {
	out, err := ex.CommandContext(ctx, "blkid", "-p", "-s", "TYPE", "-s", "PTTYPE", "-o", "export", path).CombinedOutput()
	if err != nil {
		var ee utilexec.ExitError
		if errors.As(err, &ee) && ee.ExitStatus() == 2 {
			return "", nil
		}
		return "", fmt.Errorf("blkid %s: %w: %s", path, err, strings.TrimSpace(string(out)))
	}
	var fsType, ptType string
	for _, l := range strings.Split(string(out), "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(l), "=")
		switch k {
		case "TYPE":
			fsType = v
		case "PTTYPE":
			ptType = v
		}
	}
	if ptType != "" {
		return ptType, nil
	}
	if fsType == "" {
		return "", fmt.Errorf("blkid %s: exit status 0 without a type: %q", path, out)
	}
	return fsType, nil
}
