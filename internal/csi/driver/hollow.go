package driver

import (
	"fmt"
	"os"
	"sync"
)

// HollowMounter is the hollow-mode Mounter: it keeps a mount table and the
// filesystems it "made" in memory, and creates nothing but the directories and files
// the node code itself makes. It behaves like the real one where the CSI contract
// can see it: mounting onto a missing path fails, unmounting what is not mounted
// fails, a device keeps the filesystem it was first given.
type HollowMounter struct {
	mu      sync.Mutex
	mounts  map[string]hollowMount // target -> mount
	formats map[string]string      // device -> fs type
	// Formats counts mkfs runs, for tests.
	Formats int
}

type hollowMount struct {
	source, fsType string
	options        []string
}

// NewHollowMounter returns an empty hollow mounter.
func NewHollowMounter() *HollowMounter {
	return &HollowMounter{mounts: map[string]hollowMount{}, formats: map[string]string{}}
}

func (m *HollowMounter) GetDiskFormat(device string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.formats[device], nil
}

func (m *HollowMounter) FormatAndMount(source, target, fsType string, mountOptions, _ []string) error {
	if fsType == "" {
		fsType = "ext4"
	}
	m.mu.Lock()
	if have := m.formats[source]; have == "" {
		m.formats[source] = fsType
		m.Formats++
	} else if have != fsType {
		m.mu.Unlock()
		return fmt.Errorf("mount %s on %s: wrong fs type: %s holds %s", source, target, source, have)
	}
	m.mu.Unlock()
	return m.Mount(source, target, fsType, mountOptions)
}

func (m *HollowMounter) Mount(source, target, fsType string, options []string) error {
	if _, err := os.Stat(target); err != nil {
		return fmt.Errorf("mount %s on %s: %w", source, target, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mounts[target] = hollowMount{source: source, fsType: fsType, options: append([]string(nil), options...)}
	return nil
}

func (m *HollowMounter) Unmount(target string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.mounts[target]; !ok {
		return fmt.Errorf("unmount %s: not mounted", target)
	}
	delete(m.mounts, target)
	return nil
}

func (m *HollowMounter) IsMountPoint(target string) (bool, error) {
	if _, err := os.Stat(target); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.mounts[target]
	return ok, nil
}

func (m *HollowMounter) DeviceOf(target string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, ok := m.mounts[target]
	if !ok {
		return "", fmt.Errorf("%s is not mounted", target)
	}
	// A bind mount shows the device of what it binds, as /proc/mounts does.
	for i := 0; i < 8; i++ {
		next, ok := m.mounts[mt.source]
		if !ok {
			break
		}
		mt = next
	}
	return mt.source, nil
}

// Options returns the options target was mounted with, and whether it is mounted.
func (m *HollowMounter) Options(target string) ([]string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, ok := m.mounts[target]
	return mt.options, ok
}

// Mounts returns how many mounts the table holds.
func (m *HollowMounter) Mounts() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.mounts)
}

func (m *HollowMounter) NeedResize(string, string) (bool, error) { return false, nil }
func (m *HollowMounter) Resize(string, string) (bool, error)     { return true, nil }
func (m *HollowMounter) GrowUnmounted(string) error              { return nil }
