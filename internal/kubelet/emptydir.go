package kubelet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
)

// emptyDirPluginDir is the plugin directory of emptyDir volumes, under
// <root>/pods/<uid>/volumes/ (the volumes) and <root>/pods/<uid>/plugins/ (their ready
// markers).
const emptyDirPluginDir = "kubernetes.io~empty-dir"

// emptyDirPath is where an emptyDir volume of the pod lives on the node.
func emptyDirPath(root string, uid types.UID, volume string) string {
	return filepath.Join(podDir(root, uid), "volumes", emptyDirPluginDir, volume)
}

// emptyDirReadyPath is the marker of an emptyDir volume that was set up: later syncs of
// the pod leave the volume as its containers made it.
func emptyDirReadyPath(root string, uid types.UID, volume string) string {
	return filepath.Join(podDir(root, uid), "plugins", emptyDirPluginDir, volume, "ready")
}

// emptyDirLayout is how an emptyDir volume is made.
type emptyDirLayout struct {
	// tmpfs: the volume is a tmpfs mounted at its directory (medium Memory).
	tmpfs bool
	// size is the tmpfs's size in bytes (0: the kernel's default, half the memory).
	size int64
	// mode is the volume's root directory's mode: world-writable (0777; a tmpfs root
	// keeps its sticky bit, 01777), with the setgid bit when the pod has a fsGroup.
	mode fs.FileMode
	// gid is the group the root directory is given (the pod's fsGroup), nil for none.
	gid *int64
}

// emptyDirLayoutOf decides how the pod's emptyDir volume src is made, as upstream's
// kubelet makes it: a directory of mode 0777 on the node's disk, or, for medium Memory, a
// tmpfs whose size is the node's allocatable memory, lowered to the pod's memory limit
// and then to the volume's sizeLimit when they are smaller; with a fsGroup, the root
// directory belongs to that group and has the setgid bit, so that files made in it do too.
func emptyDirLayoutOf(pod *corev1.Pod, src *corev1.EmptyDirVolumeSource, nodeMemory int64) emptyDirLayout {
	l := emptyDirLayout{mode: 0o777}
	if src.Medium == corev1.StorageMediumMemory {
		l.tmpfs, l.mode = true, 0o777|fs.ModeSticky
		var sizeLimit int64
		if src.SizeLimit != nil {
			sizeLimit = src.SizeLimit.Value()
		}
		l.size = tmpfsSize(pod, sizeLimit, nodeMemory)
	}
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		gid := *sc.FSGroup
		l.gid, l.mode = &gid, l.mode|fs.ModeSetgid
	}
	return l
}

// tmpfsSize is the size of a Memory emptyDir: the node's allocatable memory, or the pod's
// memory limit when every container declares one (or the pod does) and it is smaller, or
// the volume's sizeLimit when it is set and smaller still.
func tmpfsSize(pod *corev1.Pod, sizeLimit, nodeMemory int64) int64 {
	size := nodeMemory
	if lim := podMemoryLimit(pod); lim > 0 && (size <= 0 || lim <= size) {
		size = lim
	}
	if sizeLimit > 0 && (size <= 0 || sizeLimit <= size) {
		size = sizeLimit
	}
	return max(size, 0)
}

// podMemoryLimit is the memory the pod's cgroup is limited to: its containers' limits
// (as the pod's resources count them) when each of its containers has one, or its
// pod-level limit; 0 when it has none.
func podMemoryLimit(pod *corev1.Pod) int64 {
	declared := true
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if c.Resources.Limits.Memory().IsZero() {
				declared = false
			}
		}
	}
	if pod.Spec.Resources != nil && !pod.Spec.Resources.Limits.Memory().IsZero() {
		declared = true
	}
	if !declared {
		return 0
	}
	lim := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	return lim.Memory().Value()
}

// tmpfsOptions are the mount options of an emptyDir's tmpfs.
func (l emptyDirLayout) tmpfsOptions() string {
	if l.size > 0 {
		return fmt.Sprintf("size=%d", l.size)
	}
	return ""
}

// setUpEmptyDir makes the pod's emptyDir volume v at dir, once: the directory (and its
// tmpfs), its mode and group. A volume already set up is left as it is, except that a
// Memory volume whose tmpfs is gone is mounted again.
func (m *volumeManager) setUpEmptyDir(pod *corev1.Pod, v *corev1.Volume) (string, error) {
	dir := emptyDirPath(m.root, pod.UID, v.Name)
	ready := emptyDirReadyPath(m.root, pod.UID, v.Name)
	l := emptyDirLayoutOf(pod, v.EmptyDir, m.nodeMemory)
	if _, err := os.Stat(ready); err == nil {
		if !l.tmpfs {
			if _, err := os.Stat(dir); err == nil {
				return dir, nil
			}
		} else if mounted, err := mountinfo.Mounted(dir); err == nil && mounted {
			return dir, nil
		}
	}
	if err := makeEmptyDir(dir, l); err != nil {
		return "", fmt.Errorf("emptyDir %s: %w", v.Name, err)
	}
	if err := os.MkdirAll(filepath.Dir(ready), 0o750); err != nil {
		return "", fmt.Errorf("emptyDir %s: %w", v.Name, err)
	}
	if err := os.WriteFile(ready, nil, 0o600); err != nil {
		return "", fmt.Errorf("emptyDir %s: %w", v.Name, err)
	}
	return dir, nil
}

// makeEmptyDir creates dir, mounts its tmpfs and gives its root the layout's group and
// mode (after the mount: the mode is the tmpfs root's).
func makeEmptyDir(dir string, l emptyDirLayout) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("create dir: %w", err)
	}
	if l.tmpfs {
		mounted, err := mountinfo.Mounted(dir)
		if err != nil {
			return fmt.Errorf("check mount at %s: %w", dir, err)
		}
		if !mounted {
			if err := unix.Mount("tmpfs", dir, "tmpfs", 0, l.tmpfsOptions()); err != nil {
				return fmt.Errorf("mount tmpfs at %s: %w", dir, err)
			}
		}
	}
	if l.gid != nil {
		if err := os.Lchown(dir, -1, int(*l.gid)); err != nil {
			return fmt.Errorf("set group: %w", err)
		}
	}
	// Chmod, unlike mkdir, is not cut by the umask.
	if err := os.Chmod(dir, l.mode); err != nil {
		return fmt.Errorf("set mode: %w", err)
	}
	return nil
}

// tearDownEmptyDirs unmounts the tmpfs of the pod's Memory emptyDir volumes and removes
// its emptyDir volumes and their ready markers; the pod's containers are gone by then.
func tearDownEmptyDirs(root string, uid types.UID) error {
	base := filepath.Join(podDir(root, uid), "volumes", emptyDirPluginDir)
	entries, err := os.ReadDir(base)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var errs []error
	for _, e := range entries {
		dir := filepath.Join(base, e.Name())
		mounted, err := mountinfo.Mounted(dir)
		if err != nil {
			errs = append(errs, fmt.Errorf("is %s mounted: %w", dir, err))
			continue // never remove through a mount that may be there
		}
		if mounted {
			if err := unix.Unmount(dir, 0); err != nil && !errors.Is(err, unix.EINVAL) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", dir, err))
				continue
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", dir, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, d := range []string{base, filepath.Join(podDir(root, uid), "plugins", emptyDirPluginDir)} {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}
