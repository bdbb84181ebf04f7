package kuberuntime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeImageMounter "mounts" an image by making the target directory with an etc/
// directory in it, as an image's filesystem would have; images in fail cannot be mounted.
type fakeImageMounter struct {
	mu        sync.Mutex
	fail      map[string]error // image id → error
	mounted   map[string]string
	unmounted []string // dirs
}

func (f *fakeImageMounter) MountImage(_ context.Context, podUID, imageID, target string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail[imageID]; err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(target, "etc"), 0o755); err != nil {
		return err
	}
	if f.mounted == nil {
		f.mounted = map[string]string{}
	}
	f.mounted[target] = podUID + " " + imageID
	return nil
}

func (f *fakeImageMounter) UnmountImages(_ context.Context, podUID, dir string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for target, v := range f.mounted {
		if strings.HasPrefix(v, podUID+" ") {
			delete(f.mounted, target)
		}
	}
	f.unmounted = append(f.unmounted, dir)
	return os.RemoveAll(dir)
}

// imageVolumePod is a pod with app containers mounting image volumes: each container
// mounts the volume its mounts name.
func imageVolumePod(vols map[string]string, mounts map[string][]corev1.VolumeMount) *corev1.Pod {
	names := make([]string, 0, len(mounts))
	for name := range mounts {
		names = append(names, name)
	}
	pod := testPod(corev1.RestartPolicyAlways, nil, names...)
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].VolumeMounts = mounts[pod.Spec.Containers[i].Name]
	}
	for name, image := range vols {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name,
			VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: image}}})
	}
	return pod
}

func TestSyncPodImageVolumes(t *testing.T) {
	r, env := newTestRuntime(t)
	mounter := &fakeImageMounter{}
	r.cfg.ImageVolumes = mounter
	ctx := context.Background()
	const missing = "registry.local/missing:v1"
	env.cri.AddImage("data:v1")
	env.cri.FailPull(missing, status.Error(codes.NotFound, "failed to resolve reference: not found"))
	pod := imageVolumePod(map[string]string{"data": "data:v1", "gone": missing, "unused": missing}, map[string][]corev1.VolumeMount{
		"app":     {{Name: "data", MountPath: "/data"}, {Name: "data", MountPath: "/etc-of-data", SubPath: "etc"}},
		"blocked": {{Name: "gone", MountPath: "/gone"}},
		"nosub":   {{Name: "data", MountPath: "/x", SubPath: "not-there"}},
	})

	st, err := r.SyncPod(ctx, pod, nil)
	if !errors.Is(err, ErrImagePull) || !errors.Is(err, ErrCreateContainer) {
		t.Fatalf("err = %v, want ErrImagePull and CreateContainerError", err)
	}
	// A volume whose image cannot be pulled holds back only the container that mounts it.
	if app := stateOf(t, st, "app"); app.Waiting || app.Terminated {
		t.Fatalf("app = %+v", app)
	}
	pullErr := "rpc error: code = NotFound desc = failed to resolve reference: not found"
	if b := stateOf(t, st, "blocked"); !b.Waiting || b.Reason != "ErrImagePull" || b.Message != pullErr {
		t.Errorf("blocked = %+v", b)
	}
	if n := stateOf(t, st, "nosub"); !n.Waiting || n.Reason != "CreateContainerError" ||
		n.Message != `ImageVolumeMountFailed: volume "data" subPath "not-there": does not exist in the image` {
		t.Errorf("nosub = %+v", n)
	}
	target := filepath.Join(r.podDir(pod.UID), "volumes", "kubernetes.io~image", "data")
	imageID := imageIDOf(t, env, "data:v1")
	if got := mounter.mounted[target]; got != string(pod.UID)+" "+imageID {
		t.Errorf("mounted at %s: %q, want the pod's and image's %s", target, got, imageID)
	}
	var mounts []*runtimeapi.Mount
	for _, c := range env.cri.Containers() {
		if c.Config.GetMetadata().GetName() == "app" {
			mounts = c.Config.GetMounts()
		}
	}
	want := map[string]string{"/data": target, "/etc-of-data": filepath.Join(target, "etc")}
	for _, m := range mounts {
		if host, ok := want[m.GetContainerPath()]; ok {
			if m.GetHostPath() != host || !m.GetReadonly() {
				t.Errorf("mount %s = %s (readonly %v), want %s read-only", m.GetContainerPath(), m.GetHostPath(), m.GetReadonly(), host)
			}
			delete(want, m.GetContainerPath())
		}
	}
	if len(want) > 0 {
		t.Errorf("app lacks the mounts %v: %v", want, mounts)
	}
	evs := env.events()
	for _, want := range []string{`Normal Pulled Container image "data:v1" already present on machine`,
		`Normal Pulling Pulling image "` + missing + `"`, `Warning Failed Failed to pull image "` + missing + `": ` + pullErr,
		"Warning Failed Error: ErrImagePull", `Warning Failed Error: ImageVolumeMountFailed: volume "data" subPath "not-there"`} {
		if !hasEvent(evs, want) {
			t.Errorf("missing event %q in %q", want, evs)
		}
	}

	// KillPod unmounts them.
	if _, err := r.KillPod(ctx, &corev1.Pod{}, 0); err != nil {
		t.Fatal(err)
	}
	gone := &corev1.Pod{}
	gone.UID = pod.UID
	if _, err := r.KillPod(ctx, gone, 0); err != nil {
		t.Fatal(err)
	}
	if len(mounter.mounted) != 0 || len(mounter.unmounted) != 1 || mounter.unmounted[0] != filepath.Dir(target) {
		t.Errorf("after KillPod: mounted %v, unmounted %v", mounter.mounted, mounter.unmounted)
	}
}

func TestSyncPodImageVolumeMountFails(t *testing.T) {
	r, env := newTestRuntime(t)
	env.cri.AddImage("data:v1")
	imageID := imageIDOf(t, env, "data:v1")
	pod := imageVolumePod(map[string]string{"data": "data:v1"}, map[string][]corev1.VolumeMount{"app": {{Name: "data", MountPath: "/data"}}})
	for _, tt := range []struct {
		name    string
		mounter ImageMounter
		want    string
	}{
		{"no mounter", nil, `ImageVolumeMountFailed: mount image "data:v1" of volume "data": the container runtime cannot mount images`},
		{"mount fails", &fakeImageMounter{fail: map[string]error{imageID: errors.New("view snapshot: not found")}},
			`ImageVolumeMountFailed: mount image "data:v1" of volume "data": view snapshot: not found`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r.cfg.ImageVolumes = tt.mounter
			st, err := r.SyncPod(context.Background(), pod, nil)
			if !errors.Is(err, ErrCreateContainer) {
				t.Fatalf("err = %v", err)
			}
			if app := stateOf(t, st, "app"); !app.Waiting || app.Reason != "CreateContainerError" || app.Message != tt.want {
				t.Errorf("app = %+v", app)
			}
			if evs := env.events(); !hasEvent(evs, "Warning Failed Error: "+tt.want) {
				t.Errorf("events = %q", evs)
			}
		})
	}
}

// imageIDOf is the fake CRI's id of the image name.
func imageIDOf(t *testing.T, env *testEnv, name string) string {
	t.Helper()
	st, err := env.cri.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: name}})
	if err != nil || st.GetImage() == nil {
		t.Fatalf("image %s: %v", name, err)
	}
	return st.GetImage().GetId()
}
