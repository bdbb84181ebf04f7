package kubelet

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
)

// The files of configMap, secret, downwardAPI and projected volumes are written with the
// atomic-writer layout: the real files live in a hidden timestamped directory
// (..2006_01_02_15_04_05.<random>), the ..data symlink points at the current one, and each
// top-level name of the volume is a symlink through ..data (key → ..data/key). An update
// writes a new timestamped directory and renames a new ..data_tmp symlink over ..data,
// which is atomic: a reader sees either the old or the new set of files, never a mix.
const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
	maxFileName    = 255
	maxPath        = 4096
)

// fileProjection is one file of a volume: its content and mode (permission bits).
type fileProjection struct {
	data []byte
	mode int32
}

// writeAtomic projects payload (relative path → file) into dir, which must exist. Paths
// must be relative, without a ".." element and not start with "..". Files get their mode
// exactly (whatever the umask); with fsGroup, files and directories are group-owned by
// it and group-readable (directories also group-searchable and setgid), as the kubelet
// does for read-only volumes of pods with a fsGroup. It writes nothing and reports false
// when dir already holds exactly payload.
func writeAtomic(dir string, payload map[string]fileProjection, fsGroup *int64) (bool, error) {
	clean := make(map[string]fileProjection, len(payload))
	for p, f := range payload {
		if err := validatePayloadPath(p); err != nil {
			return false, err
		}
		clean[filepath.Clean(p)] = f
	}
	dataLink := filepath.Join(dir, dataDirName)
	oldTs, err := os.Readlink(dataLink)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("read %s: %w", dataLink, err)
	}
	var stale sets.Set[string]
	if oldTs != "" {
		oldDir := filepath.Join(dir, oldTs)
		old, err := filesUnder(oldDir)
		if err != nil {
			return false, err
		}
		stale = old.Difference(pathsAndParents(clean))
		same, err := sameContent(oldDir, clean, fsGroup)
		if err != nil {
			return false, err
		}
		if same && stale.Len() == 0 && visibleLinksPresent(dir, clean) {
			return false, nil
		}
	}
	tsDir, err := os.MkdirTemp(dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return false, fmt.Errorf("create data dir in %s: %w", dir, err)
	}
	fail := func(err error) (bool, error) {
		os.RemoveAll(tsDir)
		return false, err
	}
	if err := os.Chmod(tsDir, 0o755); err != nil { // others must be able to walk in
		return fail(err)
	}
	if err := writePayload(tsDir, clean, fsGroup); err != nil {
		return fail(err)
	}
	if err := createVisibleLinks(dir, clean); err != nil {
		return fail(err)
	}
	tmpLink := filepath.Join(dir, newDataDirName)
	os.Remove(tmpLink) // left by an interrupted write
	if err := os.Symlink(filepath.Base(tsDir), tmpLink); err != nil {
		return fail(fmt.Errorf("link new data dir: %w", err))
	}
	if err := os.Rename(tmpLink, dataLink); err != nil {
		os.Remove(tmpLink)
		return fail(fmt.Errorf("swap %s: %w", dataLink, err))
	}
	var errs []error
	for p := range stale {
		if !strings.Contains(p, "/") { // only top-level names have a visible link
			if err := os.Remove(filepath.Join(dir, p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove old path %s: %w", p, err))
			}
		}
	}
	if oldTs != "" {
		if err := os.RemoveAll(filepath.Join(dir, oldTs)); err != nil {
			errs = append(errs, fmt.Errorf("remove old data dir: %w", err))
		}
	}
	return true, errors.Join(errs...)
}

// validatePayloadPath rejects paths that could escape the volume or collide with the
// writer's own names.
func validatePayloadPath(p string) error {
	switch {
	case p == "":
		return errors.New("invalid path: must not be empty")
	case filepath.IsAbs(p):
		return fmt.Errorf("invalid path: must be relative path: %s", p)
	case len(p) > maxPath:
		return fmt.Errorf("invalid path: must be less than or equal to %d characters", maxPath)
	}
	items := strings.Split(p, "/")
	for _, item := range items {
		if item == ".." {
			return fmt.Errorf("invalid path: must not contain '..': %s", p)
		}
		if len(item) > maxFileName {
			return fmt.Errorf("invalid path: filenames must be less than or equal to %d characters", maxFileName)
		}
	}
	if strings.HasPrefix(items[0], "..") && len(items[0]) > 2 {
		return fmt.Errorf("invalid path: must not start with '..': %s", p)
	}
	return nil
}

// filesUnder lists every path under root (files and directories), relative to it.
func filesUnder(root string) (sets.Set[string], error) {
	out := sets.New[string]()
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if rel, _ := filepath.Rel(root, p); rel != "." {
			out.Insert(filepath.ToSlash(rel))
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", root, err)
	}
	return out, nil
}

// pathsAndParents is every path of payload with its parent directories.
func pathsAndParents(payload map[string]fileProjection) sets.Set[string] {
	out := sets.New[string]()
	for p := range payload {
		for ; p != "." && p != "/" && p != ""; p = filepath.Dir(p) {
			out.Insert(filepath.ToSlash(p))
		}
	}
	return out
}

// fileMode is the mode a file of the payload ends up with.
func fileMode(f fileProjection, fsGroup *int64) fs.FileMode {
	m := fs.FileMode(f.mode) & fs.ModePerm
	if fsGroup != nil {
		m |= 0o440
	}
	return m
}

// sameContent says whether oldDir holds payload's files with their contents and modes.
func sameContent(oldDir string, payload map[string]fileProjection, fsGroup *int64) (bool, error) {
	for p, f := range payload {
		path := filepath.Join(oldDir, p)
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm() != fileMode(f, fsGroup) {
			return false, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return false, err
		}
		if !bytes.Equal(b, f.data) {
			return false, nil
		}
	}
	return true, nil
}

// visibleLinksPresent says whether every top-level name of payload is there in dir.
func visibleLinksPresent(dir string, payload map[string]fileProjection) bool {
	for p := range payload {
		top, _, _ := strings.Cut(p, "/")
		if _, err := os.Lstat(filepath.Join(dir, top)); err != nil {
			return false
		}
	}
	return true
}

// writePayload writes the files into dir, in a stable order.
func writePayload(dir string, payload map[string]fileProjection, fsGroup *int64) error {
	paths := make([]string, 0, len(payload))
	for p := range payload {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		f := payload[p]
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return fmt.Errorf("create dir of %s: %w", p, err)
		}
		mode := fileMode(f, fsGroup)
		if err := os.WriteFile(full, f.data, mode); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
		if err := os.Chmod(full, mode); err != nil { // the umask applied at creation
			return fmt.Errorf("chmod %s: %w", p, err)
		}
	}
	if fsGroup == nil {
		return nil
	}
	gid := int(*fsGroup)
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, -1, gid); err != nil {
			return fmt.Errorf("chown %s: %w", p, err)
		}
		if d.IsDir() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			return os.Chmod(p, fi.Mode().Perm()|0o550|fs.ModeSetgid)
		}
		return nil
	})
}

// createVisibleLinks makes the top-level names of payload symlinks through ..data.
func createVisibleLinks(dir string, payload map[string]fileProjection) error {
	for p := range payload {
		top, _, _ := strings.Cut(p, "/")
		link := filepath.Join(dir, top)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join(dataDirName, top), link); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("link %s: %w", top, err)
		}
	}
	return nil
}
