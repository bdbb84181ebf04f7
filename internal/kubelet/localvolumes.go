package kubelet

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podDir is the pod's directory under the kubelet root.
func podDir(root string, uid types.UID) string { return filepath.Join(root, "pods", string(uid)) }

// emptyDirPath is where an emptyDir volume of the pod lives on the node.
func emptyDirPath(root string, uid types.UID, volume string) string {
	return filepath.Join(podDir(root, uid), "volumes", "kubernetes.io~empty-dir", volume)
}

// hostPaths maps the pod's volumes to the host paths its containers bind: published CSI
// volumes at their target paths, emptyDirs (created here), hostPaths, and the configMap,
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
			dir := emptyDirPath(m.root, pod.UID, v.Name)
			if err := os.MkdirAll(dir, 0o777); err != nil {
				return nil, fmt.Errorf("emptyDir %s: %w", v.Name, err)
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

// mountsUnder lists the mount points at or under dir, from /proc/self/mountinfo.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out, sc.Err()
}

// unescapeMountPath undoes the octal escapes (\040 for a space, …) of mountinfo paths.
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range s[i+1 : i+4] {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + byte(c-'0')
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
