package rundir

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/moby/sys/mountinfo"

	"github.com/kubelab/kubelab/internal/util/atomicfile"
)

// MaxSocketPath is the longest path a unix socket address holds (sun_path is 108 bytes,
// one of them the terminating NUL).
const MaxSocketPath = 107

// Root is where the run directories are: /run/kubelab for root; for another user
// $XDG_RUNTIME_DIR/kubelab, or /tmp/kubelab-<uid> without one.
func Root() string {
	uid := os.Geteuid()
	if uid == 0 {
		return "/run/kubelab"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		return filepath.Join(d, "kubelab")
	}
	return "/tmp/kubelab-" + strconv.Itoa(uid)
}

// ID is the 8 hex digits that stand for dir: the start of the SHA-256 of its cleaned path.
func ID(dir string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(dir)))
	return hex.EncodeToString(sum[:4])
}

// For is the run directory of dir (a data dir, or the dir of one component): Root/ID(dir).
func For(dir string) string { return filepath.Join(Root(), ID(dir)) }

// CheckSocket returns an error when path does not fit in a unix socket address.
func CheckSocket(path string) error {
	if len(path) > MaxSocketPath {
		return fmt.Errorf("socket %s is %d bytes long, more than the %d a unix socket address holds", path, len(path), MaxSocketPath)
	}
	return nil
}

// Link makes target a directory and path a symbolic link to it, so that what is put in
// path lands in target. A directory at path that an earlier kubelab left holding only
// sockets is replaced; one holding anything else is an error.
func Link(path, target string) error {
	if err := os.MkdirAll(target, 0o750); err != nil {
		return fmt.Errorf("make %s: %w", target, err)
	}
	if cur, err := os.Readlink(path); err == nil && cur == target {
		return nil
	}
	if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
		if err := removeSocketsDir(path); err != nil {
			return fmt.Errorf("replace %s with a link to %s: %w", path, target, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("make %s: %w", filepath.Dir(path), err)
	}
	return atomicfile.Symlink(target, path)
}

// removeSocketsDir removes dir when it holds nothing but sockets.
func removeSocketsDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Type()&fs.ModeSocket == 0 {
			return fmt.Errorf("%s holds %s, not a socket", dir, e.Name())
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return os.Remove(dir)
}

// Remove removes run directory dir and what is in it (sockets, links, directories). It
// never removes through a mount: with one under dir it returns an error naming it and
// leaves dir as it is. Root stays, for other data dirs' run directories.
func Remove(dir string) error {
	if !filepath.IsAbs(dir) || filepath.Dir(filepath.Clean(dir)) != Root() {
		return fmt.Errorf("remove run dir %q: not a directory of %s", dir, Root())
	}
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return fmt.Errorf("remove run dir %s: list mounts: %w", dir, err)
	}
	var errs []error
	for _, m := range mounts {
		errs = append(errs, fmt.Errorf("%s is mounted (%s)", m.Mountpoint, m.FSType))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove run dir %s: %w", dir, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove run dir: %w", err)
	}
	return nil
}
