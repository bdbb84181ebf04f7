package blockdev

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// Fake is an in-memory block layer: files are sizes, loop devices are names. Fail makes
// the next calls of an operation fail.
type Fake struct {
	mu    sync.Mutex
	files map[string]int64
	loops map[string]string // dev -> file
	next  int
	fail  map[string]error
}

// NewFake returns an empty Fake.
func NewFake() *Fake {
	return &Fake{files: map[string]int64{}, loops: map[string]string{}, fail: map[string]error{}}
}

// Fail makes every later call of op ("CreateFile", "CopyFile", "GrowFile", "Attach",
// "Refresh", "Detach") fail with err; a nil err clears it.
func (f *Fake) Fail(op string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.fail, op)
		return
	}
	f.fail[op] = err
}

func (f *Fake) check(op string) error {
	if err := f.fail[op]; err != nil {
		return fmt.Errorf("%s (injected): %w", op, err)
	}
	return nil
}

// CreateFile records a file of size bytes.
func (f *Fake) CreateFile(path string, size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("CreateFile"); err != nil {
		return err
	}
	if _, ok := f.files[path]; ok {
		return fmt.Errorf("create %s: %w", path, os.ErrExist)
	}
	f.files[path] = size
	return nil
}

// GrowFile grows a recorded file.
func (f *Fake) GrowFile(path string, size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("GrowFile"); err != nil {
		return err
	}
	cur, ok := f.files[path]
	if !ok {
		return fmt.Errorf("grow %s: %w", path, os.ErrNotExist)
	}
	f.files[path] = max(cur, size)
	return nil
}

// RemoveFile forgets a file.
func (f *Fake) RemoveFile(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.files, path)
	return nil
}

// FileExists reports whether a file is recorded.
func (f *Fake) FileExists(path string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.files[path]
	return ok
}

// CopyFile records dst with max(size, size of src).
func (f *Fake) CopyFile(dst, src string, size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("CopyFile"); err != nil {
		return err
	}
	s, ok := f.files[src]
	if !ok {
		return fmt.Errorf("copy %s: %w", src, os.ErrNotExist)
	}
	if _, ok := f.files[dst]; ok {
		return fmt.Errorf("copy to %s: %w", dst, os.ErrExist)
	}
	f.files[dst] = max(s, size)
	return nil
}

// Attach gives path a fake device name.
func (f *Fake) Attach(path string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("Attach"); err != nil {
		return "", err
	}
	if _, ok := f.files[path]; !ok {
		return "", fmt.Errorf("attach %s: %w", path, os.ErrNotExist)
	}
	dev := "/dev/fakeloop" + strconv.Itoa(f.next)
	f.next++
	f.loops[dev] = path
	return dev, nil
}

// Refresh checks that dev is set up.
func (f *Fake) Refresh(dev string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("Refresh"); err != nil {
		return err
	}
	if _, ok := f.loops[dev]; !ok {
		return fmt.Errorf("refresh %s: %w", dev, errors.New("no such device"))
	}
	return nil
}

// Detach forgets dev.
func (f *Fake) Detach(dev string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("Detach"); err != nil {
		return err
	}
	delete(f.loops, dev)
	return nil
}

// BackingFile returns the file behind dev, or "".
func (f *Fake) BackingFile(dev string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.loops[dev]
}

// Size returns the size of the file behind dev.
func (f *Fake) Size(dev string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.loops[dev]
	if !ok {
		return 0, fmt.Errorf("size of %s: no such device", dev)
	}
	return f.files[p], nil
}

// List returns the devices whose file is in dir.
func (f *Fake) List(dir string) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for d, p := range f.loops {
		if filepath.Dir(p) == filepath.Clean(dir) {
			out[d] = p
		}
	}
	return out
}

// Files returns the recorded files and their sizes.
func (f *Fake) Files() map[string]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int64, len(f.files))
	for k, v := range f.files {
		out[k] = v
	}
	return out
}

// Devices returns the set-up devices and their files.
func (f *Fake) Devices() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]string, len(f.loops))
	for k, v := range f.loops {
		out[k] = v
	}
	return out
}
