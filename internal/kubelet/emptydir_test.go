package kubelet

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/testutil"
)

// memoryLimited is a container with the given memory limit ("" for none).
func memoryLimited(name, limit string) corev1.Container {
	c := corev1.Container{Name: name}
	if limit != "" {
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)}
	}
	return c
}

func TestEmptyDirLayout(t *testing.T) {
	const node = 8 << 30
	mem := func(sizeLimit string) *corev1.EmptyDirVolumeSource {
		src := &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
		if sizeLimit != "" {
			src.SizeLimit = ptr.To(resource.MustParse(sizeLimit))
		}
		return src
	}
	pod := func(fsGroup *int64, inits []corev1.Container, cs ...corev1.Container) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: inits, Containers: cs}}
		if fsGroup != nil {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: fsGroup}
		}
		return p
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		src  *corev1.EmptyDirVolumeSource
		want emptyDirLayout
	}{
		{"disk: world-writable", pod(nil, nil, memoryLimited("a", "")), &corev1.EmptyDirVolumeSource{},
			emptyDirLayout{mode: 0o777}},
		{"disk with a fsGroup: the group's, setgid", pod(ptr.To[int64](123), nil, memoryLimited("a", "")), &corev1.EmptyDirVolumeSource{},
			emptyDirLayout{mode: 0o777 | fs.ModeSetgid, gid: ptr.To[int64](123)}},
		{"memory, no limits: the node's memory", pod(nil, nil, memoryLimited("a", "")), mem(""),
			emptyDirLayout{tmpfs: true, size: node, mode: 0o777 | fs.ModeSticky}},
		{"memory, a sizeLimit", pod(nil, nil, memoryLimited("a", "")), mem("64Mi"),
			emptyDirLayout{tmpfs: true, size: 64 << 20, mode: 0o777 | fs.ModeSticky}},
		{"memory, a sizeLimit above the node's memory", pod(nil, nil, memoryLimited("a", "")), mem("16Gi"),
			emptyDirLayout{tmpfs: true, size: node, mode: 0o777 | fs.ModeSticky}},
		{"memory, every container limited: their sum", pod(nil, nil, memoryLimited("a", "100Mi"), memoryLimited("b", "28Mi")), mem(""),
			emptyDirLayout{tmpfs: true, size: 128 << 20, mode: 0o777 | fs.ModeSticky}},
		{"memory, the sizeLimit below the pod's limit", pod(nil, nil, memoryLimited("a", "100Mi")), mem("10Mi"),
			emptyDirLayout{tmpfs: true, size: 10 << 20, mode: 0o777 | fs.ModeSticky}},
		{"memory, the pod's limit below the sizeLimit", pod(nil, nil, memoryLimited("a", "100Mi")), mem("1Gi"),
			emptyDirLayout{tmpfs: true, size: 100 << 20, mode: 0o777 | fs.ModeSticky}},
		{"memory, one container unlimited: the node's memory", pod(nil, nil, memoryLimited("a", "100Mi"), memoryLimited("b", "")), mem(""),
			emptyDirLayout{tmpfs: true, size: node, mode: 0o777 | fs.ModeSticky}},
		{"memory, an unlimited init container: the node's memory", pod(nil, []corev1.Container{memoryLimited("i", "")}, memoryLimited("a", "100Mi")), mem(""),
			emptyDirLayout{tmpfs: true, size: node, mode: 0o777 | fs.ModeSticky}},
		{"memory, a larger init container: its limit", pod(nil, []corev1.Container{memoryLimited("i", "200Mi")}, memoryLimited("a", "100Mi")), mem(""),
			emptyDirLayout{tmpfs: true, size: 200 << 20, mode: 0o777 | fs.ModeSticky}},
		{"memory with a fsGroup", pod(ptr.To[int64](7), nil, memoryLimited("a", "")), mem("1Mi"),
			emptyDirLayout{tmpfs: true, size: 1 << 20, mode: 0o777 | fs.ModeSticky | fs.ModeSetgid, gid: ptr.To[int64](7)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := emptyDirLayoutOf(tt.pod, tt.src, node)
			if got.tmpfs != tt.want.tmpfs || got.size != tt.want.size || got.mode != tt.want.mode ||
				(got.gid == nil) != (tt.want.gid == nil) || got.gid != nil && *got.gid != *tt.want.gid {
				t.Errorf("layout = %+v (gid %v), want %+v (gid %v)", got, ptr.Deref(got.gid, -1), tt.want, ptr.Deref(tt.want.gid, -1))
			}
		})
	}
	if o := (emptyDirLayout{tmpfs: true, size: 1 << 20}).tmpfsOptions(); o != "size=1048576" {
		t.Errorf("tmpfs options %q", o)
	}
	if o := (emptyDirLayout{tmpfs: true}).tmpfsOptions(); o != "" {
		t.Errorf("tmpfs options without a size %q", o)
	}
}

// A real node's emptyDirs: world-writable whatever the umask, Memory ones on a tmpfs of
// the sizeLimit, set up once (what the containers do to them stays), unmounted and
// removed at tear down.
func TestEmptyDirSetUpTearDown(t *testing.T) {
	testutil.RequireRoot(t)
	root := t.TempDir()
	t.Cleanup(func() { unmountAllUnder(t, root) })
	old := unix.Umask(0o022)
	t.Cleanup(func() { unix.Umask(old) })
	m := newVolumeManager("node-1", root, nil, nil, nil)
	m.local, m.nodeMemory = true, 1<<30
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns1", UID: types.UID("uid-ed")},
		Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{FSGroup: ptr.To[int64](1234)}, Volumes: []corev1.Volume{
			{Name: "disk", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("16Mi"))}}},
		}}}
	paths, err := m.hostPaths(pod)
	if err != nil {
		t.Fatal(err)
	}
	disk, mem := paths["disk"], paths["mem"]
	if disk != emptyDirPath(root, pod.UID, "disk") || mem != emptyDirPath(root, pod.UID, "mem") {
		t.Fatalf("paths %v", paths)
	}
	for dir, want := range map[string]fs.FileMode{disk: fs.ModeDir | 0o777 | fs.ModeSetgid, mem: fs.ModeDir | 0o777 | fs.ModeSticky | fs.ModeSetgid} {
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", dir, fi.Mode(), want)
		}
		var st unix.Stat_t
		if err := unix.Stat(dir, &st); err != nil || st.Gid != 1234 {
			t.Errorf("%s: gid %d (%v), want the fsGroup 1234", dir, st.Gid, err)
		}
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(mem, &sfs); err != nil || sfs.Type != unix.TMPFS_MAGIC || int64(sfs.Blocks)*sfs.Bsize != 16<<20 {
		t.Errorf("Memory emptyDir: statfs %+v (%v), want a tmpfs of 16Mi", sfs, err)
	}
	if mounted, _ := mountinfo.Mounted(disk); mounted {
		t.Error("the disk emptyDir is a mount")
	}

	// What the containers make of the volume stays at the next syncs.
	if err := os.WriteFile(filepath.Join(mem, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(disk, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := m.hostPaths(pod); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(disk); fi.Mode().Perm() != 0o700 {
		t.Errorf("a later sync changed the volume's mode to %v", fi.Mode())
	}
	if ms, _ := mountinfo.GetMounts(mountinfo.SingleEntryFilter(mem)); len(ms) != 1 {
		t.Errorf("Memory emptyDir mounted %d times", len(ms))
	}
	if b, err := os.ReadFile(filepath.Join(mem, "f")); err != nil || string(b) != "x" {
		t.Errorf("file in the Memory emptyDir: %q %v", b, err)
	}

	if err := m.tearDown(t.Context(), pod.UID); err != nil {
		t.Fatal(err)
	}
	if ms, _ := mountinfo.GetMounts(mountinfo.PrefixFilter(root)); len(ms) > 0 {
		t.Errorf("mounts left after tear down: %v", ms)
	}
	for _, p := range []string{disk, mem, filepath.Dir(emptyDirReadyPath(root, pod.UID, "mem"))} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s after tear down: %v", p, err)
		}
	}
	if err := m.tearDown(t.Context(), pod.UID); err != nil {
		t.Errorf("second tear down: %v", err)
	}
}
