package driver

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	mount "k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"
)

// Mounter is what the node needs to put filesystems on devices and paths.
type Mounter interface {
	// GetDiskFormat returns the filesystem on device among ext2, ext3, ext4 and xfs,
	// "" when it holds none of them. It is not the blankness test: FormatAndMount
	// makes that one itself before it formats anything.
	GetDiskFormat(device string) (string, error)
	// FormatAndMount makes fsType on source when it is blank and mounts it at target.
	FormatAndMount(source, target, fsType string, mountOptions, formatOptions []string) error
	// Mount mounts source at target (options "bind", "ro", …).
	Mount(source, target, fsType string, options []string) error
	Unmount(target string) error
	// IsMountPoint reports whether target is a mount point; an error wrapping
	// os.ErrNotExist when it does not exist.
	IsMountPoint(target string) (bool, error)
	// DeviceOf returns the device mounted at target.
	DeviceOf(target string) (string, error)
	// NeedResize and Resize grow the filesystem on device mounted at mountPath to
	// fill the device.
	NeedResize(device, mountPath string) (bool, error)
	Resize(device, mountPath string) (bool, error)
	// GrowUnmounted grows the ext2/3/4 filesystem on an unmounted device to fill it
	// (checked first, as resize2fs asks).
	GrowUnmounted(device string) error
}

// Devices finds the block devices of attached volumes on the node.
type Devices interface {
	// Resolve returns the device of volumeID, attached as devicePath (/dev/xvdba).
	Resolve(devicePath, volumeID string) (string, error)
	// Size returns the size of device in bytes.
	Size(device string) (int64, error)
}

// ErrDeviceNotFound is returned by Devices.Resolve when the volume has no device.
var ErrDeviceNotFound = errors.New("device not found")

// SystemMounter is the real Mounter: k8s.io/mount-utils' SafeFormatAndMount
// (blkid, mkfs.*, fsck, mount, umount) and ResizeFs (resize2fs, xfs_growfs), with
// the blankness test of a new volume made in-process when the installed blkid
// allows it (blank.go).
type SystemMounter struct {
	sfm    *mount.SafeFormatAndMount
	resize *mount.ResizeFs
	// fastPath returns the decision whether a device whose signature windows are
	// all zero is formatted without blkid. It is asked on every read-write
	// FormatAndMount, so it must be cheap after its first call.
	fastPath func() BlankFastPath
}

// NewSystemMounter returns the real Mounter. Its blank-device fast path is decided
// once per process, against the blkid and mkfs on PATH, on the first call of
// BlankFastPath or FormatAndMount.
func NewSystemMounter() *SystemMounter {
	ex := utilexec.New()
	return &SystemMounter{
		sfm:      mount.NewSafeFormatAndMount(mount.New(""), ex),
		resize:   mount.NewResizeFs(ex),
		fastPath: installedBlankFastPath,
	}
}

// BlankFastPath returns the decision whether FormatAndMount formats a device whose
// signature windows are all zero without running blkid; the first call makes it
// (the driver does so when it starts).
func (m *SystemMounter) BlankFastPath() BlankFastPath {
	if m.fastPath == nil {
		return BlankFastPath{Reason: "no decision made: the mounter was not made by NewSystemMounter"}
	}
	return m.fastPath()
}

// GetDiskFormat reads the superblocks in Go rather than running blkid: blkid costs
// a fork and exec (about 15 ms here), and FormatAndMount runs it anyway.
func (m *SystemMounter) GetDiskFormat(device string) (string, error) {
	f, err := os.Open(device)
	if err != nil {
		return "", fmt.Errorf("read superblock of %s: %w", device, err)
	}
	defer f.Close()
	buf := make([]byte, 2048)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read superblock of %s: %w", device, err)
	}
	return probeFS(buf[:n]), nil
}

// probeFS names the filesystem whose superblock starts the device: xfs ("XFSB" at
// 0) or ext2/3/4 (magic 0xEF53 at 1080; ext4 with extents, 64bit or flex_bg, ext3
// with a journal). Anything else is "".
func probeFS(b []byte) string {
	if len(b) >= 4 && string(b[:4]) == "XFSB" {
		return "xfs"
	}
	if len(b) < 1024+100 || b[1080] != 0x53 || b[1081] != 0xEF {
		return ""
	}
	le32 := func(off int) uint32 {
		return uint32(b[off]) | uint32(b[off+1])<<8 | uint32(b[off+2])<<16 | uint32(b[off+3])<<24
	}
	compat, incompat := le32(1024+0x5C), le32(1024+0x60)
	switch {
	case incompat&(0x40|0x80|0x200) != 0:
		return "ext4"
	case compat&0x4 != 0:
		return "ext3"
	}
	return "ext2"
}

// FormatAndMount formats a blank device and mounts it, with mount-utils' mkfs and
// mount options. When the blank-device fast path is enabled (BlankFastPath), a
// device whose signature windows are all zero is blank for blkid too (see
// signatureWindows), so it is formatted without asking blkid; anything else, every
// read-only mount and every call with the fast path off goes through
// SafeFormatAndMount as it is.
func (m *SystemMounter) FormatAndMount(source, target, fsType string, mountOptions, formatOptions []string) error {
	if fsType == "" {
		fsType = "ext4"
	}
	if !slices.Contains(mountOptions, "ro") && m.BlankFastPath().Enabled {
		blank, err := deviceBlank(source)
		if err != nil {
			return err
		}
		if blank {
			return m.formatBlankAndMount(source, target, fsType, mountOptions, formatOptions)
		}
	}
	return m.sfm.FormatAndMountSensitiveWithFormatOptions(source, target, fsType, mountOptions, nil, formatOptions)
}

// formatBlankAndMount runs mkfs.<fsType> on a device known to be blank and mounts
// it, as SafeFormatAndMount does once blkid found nothing.
func (m *SystemMounter) formatBlankAndMount(source, target, fsType string, mountOptions, formatOptions []string) error {
	if out, err := m.sfm.Exec.Command("mkfs."+fsType, mkfsArgs(fsType, source, formatOptions)...).CombinedOutput(); err != nil {
		return fmt.Errorf("format of disk %q as %s failed: %w: %s", source, fsType, err, out)
	}
	opts := append(slices.Clone(mountOptions), "defaults")
	if err := m.sfm.Mount(source, target, fsType, opts); err != nil {
		return fmt.Errorf("mount %s at %s after formatting it: %w", source, target, err)
	}
	return nil
}

// mkfsArgs are mount-utils' mkfs arguments: the volume's format options, then
// force and no reserved blocks for ext3/ext4, force for xfs, then the device.
func mkfsArgs(fsType, source string, formatOptions []string) []string {
	args := slices.Clone(formatOptions)
	switch fsType {
	case "ext3", "ext4":
		args = append(args, "-F", "-m0")
	case "xfs":
		args = append(args, "-f")
	}
	return append(args, source)
}

func (m *SystemMounter) Mount(source, target, fsType string, options []string) error {
	return m.sfm.Mount(source, target, fsType, options)
}

func (m *SystemMounter) Unmount(target string) error { return m.sfm.Unmount(target) }

func (m *SystemMounter) IsMountPoint(target string) (bool, error) {
	if _, err := os.Stat(target); err != nil {
		return false, err
	}
	return m.sfm.IsMountPoint(target)
}

func (m *SystemMounter) DeviceOf(target string) (string, error) {
	dev, refs, err := mount.GetDeviceNameFromMount(m.sfm, target)
	if err != nil {
		return "", err
	}
	if refs == 0 || dev == "" {
		return "", fmt.Errorf("%s is not mounted", target)
	}
	return dev, nil
}

func (m *SystemMounter) NeedResize(device, mountPath string) (bool, error) {
	return m.resize.NeedResize(device, mountPath)
}

func (m *SystemMounter) Resize(device, mountPath string) (bool, error) {
	return m.resize.Resize(device, mountPath)
}

func (m *SystemMounter) GrowUnmounted(device string) error {
	// e2fsck -p exits 1 when it fixed something, which is fine here.
	if out, err := m.sfm.Exec.Command("e2fsck", "-f", "-p", device).CombinedOutput(); err != nil {
		if ee, ok := err.(utilexec.ExitError); !ok || ee.ExitStatus() > 1 {
			return fmt.Errorf("e2fsck %s: %w: %s", device, err, out)
		}
	}
	if out, err := m.sfm.Exec.Command("resize2fs", device).CombinedOutput(); err != nil {
		return fmt.Errorf("resize2fs %s: %w: %s", device, err, out)
	}
	return nil
}

// DeviceDir resolves devices the way a node sees EBS volumes: the publish
// context's /dev/xvdXX under the node's device directory, else the NVMe by-id
// name of the volume, both followed to the block device they link to.
type DeviceDir struct {
	Dir string
	// Hollow accepts a regular file or a dangling link as the device, and when the
	// hollow cloud made no link at all, the conventional name: in hollow mode attached
	// volumes are not block devices.
	Hollow bool
}

// Resolve implements Devices.
func (d DeviceDir) Resolve(devicePath, volumeID string) (string, error) {
	var candidates []string
	if devicePath != "" {
		candidates = append(candidates, filepath.Join(d.Dir, strings.TrimPrefix(filepath.Clean(devicePath), "/dev/")))
	}
	if volumeID != "" {
		candidates = append(candidates, filepath.Join(d.Dir, "disk", "by-id",
			"nvme-Amazon_Elastic_Block_Store_"+strings.ReplaceAll(volumeID, "-", "")))
	}
	var found []string
	for _, c := range candidates {
		if dev, ok := d.check(c); ok {
			found = append(found, dev)
		}
	}
	switch {
	case len(found) == 0 && d.Hollow && len(candidates) > 0:
		return candidates[0], nil
	case len(found) == 0:
		return "", fmt.Errorf("volume %s: no device at %s: %w", volumeID, strings.Join(candidates, " or "), ErrDeviceNotFound)
	case len(found) == 2 && found[0] != found[1]:
		// The by-id name belongs to the volume; a /dev/xvdXX name may be stale.
		return found[1], nil
	}
	return found[0], nil
}

func (d DeviceDir) check(p string) (string, bool) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		if d.Hollow {
			if _, lerr := os.Lstat(p); lerr == nil {
				return p, true
			}
		}
		return "", false
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", false
	}
	if st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0 {
		return real, true
	}
	if d.Hollow && st.Mode().IsRegular() {
		return real, true
	}
	return "", false
}

// Size implements Devices: the end of the device (or file), 0 for a dangling link.
func (d DeviceDir) Size(device string) (int64, error) {
	f, err := os.Open(device)
	if err != nil {
		if d.Hollow && errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		return 0, fmt.Errorf("size of %s: %w", device, err)
	}
	defer f.Close()
	n, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", device, err)
	}
	return n, nil
}
