package kubelet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/sys/mountinfo"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podDir is the pod's directory under the kubelet root.
func podDir(root string, uid types.UID) string { return filepath.Join(root, "pods", string(uid)) }

// hostPaths maps the pod's volumes to the host paths its containers bind: published CSI
// volumes at their target paths, emptyDirs (set up here), hostPaths, and the configMap,
// secret, downwardAPI and projected volumes setUp wrote.
func (m *volumeManager) hostPaths(pod *corev1.Pod) (PodVolumes, error) {
	out := PodVolumes{}
	m.mu.Lock()
	for _, v := range m.mounted[pod.UID] {
		out[v.PodVolume] = targetPath(m.root, pod.UID, v.PVName)
	}
	m.mu.Unlock()
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.EmptyDir != nil:
			dir, err := m.setUpEmptyDir(pod, &v)
			if err != nil {
				return nil, err
			}
			out[v.Name] = dir
		case v.HostPath != nil:
			if t := v.HostPath.Type; t != nil && (*t == corev1.HostPathDirectoryOrCreate) {
				if err := os.MkdirAll(v.HostPath.Path, 0o755); err != nil {
					return nil, fmt.Errorf("hostPath %s: %w", v.Name, err)
				}
			}
			out[v.Name] = v.HostPath.Path
		default:
			if plugin, _ := configVolumePlugin(&v); plugin != "" {
				out[v.Name] = configVolumePath(m.root, pod.UID, plugin, v.Name)
			}
		}
	}
	return out, nil
}

// removePodDir removes the pod's directory once nothing is mounted under it; a mount
// still there is an error (removing through it would delete the volume's data).
func removePodDir(root string, uid types.UID) error {
	dir := podDir(root, uid)
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	if len(mounts) > 0 {
		return fmt.Errorf("pod dir %s: still mounted: %s", dir, strings.Join(mounts, ", "))
	}
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove pod dir %s: %w", dir, err)
	}
	return nil
}

// mountsUnder lists the mount points at or under dir.
func mountsUnder(dir string) ([]string, error) {
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Mountpoint)
	}
	return out, nil
}
