package blockdev

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Loop is the real block layer: files on the local filesystem and kernel loop devices.
type Loop struct{}

// CreateFile makes a new sparse file of size bytes at path; it fails if path exists.
func (Loop) CreateFile(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("size %s to %d bytes: %w", path, size, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

// GrowFile extends path to size bytes (sparse). It never shrinks a file.
func (Loop) GrowFile(path string, size int64) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("grow %s: %w", path, err)
	}
	if st.Size() >= size {
		return nil
	}
	if err := os.Truncate(path, size); err != nil {
		return fmt.Errorf("grow %s to %d bytes: %w", path, size, err)
	}
	return nil
}

// RemoveFile removes path; a missing file is not an error.
func (Loop) RemoveFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

// FileExists reports whether path exists.
func (Loop) FileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// CopyFile makes dst a copy of src's data, then sizes it to size bytes (at least src's
// size). Only the data extents of src are copied, so holes stay holes.
func (Loop) CopyFile(dst, src string, size int64) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("copy to %s: %w", dst, err)
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close %s: %w", dst, cerr)
		}
		if err != nil {
			os.Remove(dst)
		}
	}()
	st, err := in.Stat()
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := copySparse(int(out.Fd()), int(in.Fd()), st.Size()); err != nil {
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	if size < st.Size() {
		size = st.Size()
	}
	if err := out.Truncate(size); err != nil {
		return fmt.Errorf("size %s to %d bytes: %w", dst, size, err)
	}
	return nil
}

// copySparse copies the data extents of in (of length n) to the same offsets in out.
func copySparse(out, in int, n int64) error {
	var off int64
	for off < n {
		start, err := unix.Seek(in, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // no data after off
		}
		if err != nil {
			return fmt.Errorf("seek data at %d: %w", off, err)
		}
		end, err := unix.Seek(in, start, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("seek hole at %d: %w", start, err)
		}
		for start < end {
			roff, woff := start, start
			c, err := unix.CopyFileRange(in, &roff, out, &woff, int(min(end-start, 1<<30)), 0)
			if err != nil {
				return fmt.Errorf("copy range at %d: %w", start, err)
			}
			if c == 0 {
				return fmt.Errorf("copy range at %d: unexpected end of file", start)
			}
			start += int64(c)
		}
		off = end
	}
	return nil
}

// Attach sets up a free loop device over path and returns its device path (/dev/loopN).
func (Loop) Attach(path string) (string, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return "", fmt.Errorf("attach %s: %w", path, err)
	}
	defer ctl.Close()
	back, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return "", fmt.Errorf("attach %s: %w", path, err)
	}
	defer back.Close()
	var lastErr error
	for try := 0; try < 20; try++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", fmt.Errorf("attach %s: get free loop device: %w", path, err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		err = configure(dev, int(back.Fd()), path)
		if err == nil {
			return dev, nil
		}
		lastErr = err
		if !errors.Is(err, unix.EBUSY) && !errors.Is(err, os.ErrNotExist) {
			break
		}
		// Another process took the device between GET_FREE and CONFIGURE; try the next.
		time.Sleep(time.Millisecond)
	}
	return "", fmt.Errorf("attach %s: %w", path, lastErr)
}

func configure(dev string, backFd int, path string) error {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dev, err)
	}
	defer f.Close()
	cfg := unix.LoopConfig{Fd: uint32(backFd)}
	copy(cfg.Info.File_name[:], path)
	err = unix.IoctlLoopConfigure(int(f.Fd()), &cfg)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOTTY) {
		// Kernels before 5.8 have no LOOP_CONFIGURE.
		if err = unix.IoctlSetInt(int(f.Fd()), unix.LOOP_SET_FD, backFd); err == nil {
			info := unix.LoopInfo64{}
			copy(info.File_name[:], path)
			if err = unix.IoctlLoopSetStatus64(int(f.Fd()), &info); err != nil {
				unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("configure %s: %w", dev, err)
	}
	return nil
}

// Refresh makes dev take the current size of its backing file.
func (Loop) Refresh(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("refresh %s: %w", dev, err)
	}
	defer f.Close()
	if err := unix.IoctlSetInt(int(f.Fd()), unix.LOOP_SET_CAPACITY, 0); err != nil {
		return fmt.Errorf("refresh %s: %w", dev, err)
	}
	return nil
}

// Detach releases dev. If dev is still open (mounted), the kernel releases it on the last
// close. A device that is already free is not an error.
func (Loop) Detach(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("detach %s: %w", dev, err)
	}
	defer f.Close()
	if err := unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0); err != nil && !errors.Is(err, unix.ENXIO) {
		return fmt.Errorf("detach %s: %w", dev, err)
	}
	return nil
}

// BackingFile returns the file behind dev, or "" when dev is not set up.
func (Loop) BackingFile(dev string) string {
	b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file"))
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)")
}

// Size returns the size in bytes of block device dev.
func (Loop) Size(dev string) (int64, error) {
	b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "size"))
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", dev, err)
	}
	sectors, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", dev, err)
	}
	return sectors * 512, nil
}

// List returns the loop devices whose backing file is in dir, device path to file.
func (l Loop) List(dir string) map[string]string {
	out := map[string]string{}
	entries, _ := os.ReadDir("/sys/block")
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "loop") {
			continue
		}
		dev := "/dev/" + e.Name()
		if f := l.BackingFile(dev); f != "" && filepath.Dir(f) == filepath.Clean(dir) {
			out[dev] = f
		}
	}
	return out
}
