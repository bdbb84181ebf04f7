package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile replaces path with data, with permission bits mode. On error path is as it
// was and no temporary file is left.
func WriteFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := fill(tmp, data, mode); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Replace replaces path with data, with permission bits mode, as WriteFile does but
// without syncing: readers and a crash of the process see the old content or the new,
// a crash of the machine may leave either or an empty file. For state on a hot path that
// only matters while processes of this machine live.
func Replace(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := write(tmp, data, mode, false); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// fill writes data to f, sets its mode, syncs and closes it.
func fill(f *os.File, data []byte, mode os.FileMode) error { return write(f, data, mode, true) }

// write writes data to f, sets its mode, syncs it if asked and closes it.
func write(f *os.File, data []byte, mode os.FileMode, sync bool) error {
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Chmod(mode)
	}
	if werr == nil && sync {
		werr = f.Sync()
	}
	return errors.Join(werr, f.Close())
}

// Symlink makes newname a symbolic link to oldname, replacing what is at newname. On
// error newname is as it was and no temporary link is left.
func Symlink(oldname, newname string) error {
	tmp := newname + ".tmp"
	_ = os.Remove(tmp) // left by an interrupted call
	if err := os.Symlink(oldname, tmp); err != nil {
		return fmt.Errorf("link %s to %s: %w", newname, oldname, err)
	}
	if err := os.Rename(tmp, newname); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("link %s to %s: %w", newname, oldname, err)
	}
	if err := syncDir(filepath.Dir(newname)); err != nil {
		return fmt.Errorf("link %s to %s: %w", newname, oldname, err)
	}
	return nil
}

// syncDir makes the entries of dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
