package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"

	"github.com/kubelab/kubelab/internal/kubelet"
)

// ImageMounter mounts pulled images' filesystems for image volumes: what a CRI runtime
// that supports Mount.image does itself (containerd 2.1), for one that does not
// (internal/containerd's ImageVolumes: a read-only snapshot of the image, on real nodes).
type ImageMounter interface {
	// MountImage makes the filesystem of the pulled image imageID available read-only at
	// target, a directory it creates, for the pod podUID. A target already mounted is
	// left as it is.
	MountImage(ctx context.Context, podUID, imageID, target string) error
	// UnmountImages undoes every MountImage of the pod podUID and removes dir, the
	// directory its targets are in.
	UnmountImages(ctx context.Context, podUID, dir string) error
}

// imageVolumePluginDir is the directory of a pod's image volumes under its volumes
// directory: <root>/pods/<uid>/volumes/kubernetes.io~image/<volume>.
const imageVolumePluginDir = "kubernetes.io~image"

func imageVolumeDir(podDir string) string {
	return filepath.Join(podDir, "volumes", imageVolumePluginDir)
}

// imageVolume is the outcome of setting up one image volume: the host path its
// containers bind, or why they cannot start.
type imageVolume struct {
	path string
	fail *imageResult
}

// setUpImageVolumes makes the pod's image volumes ready for the containers about to
// start, as upstream's kubelet does before it starts any: each volume's image present
// (pulled as its pullPolicy says, with the pod's pull secrets, the events the pod's),
// then mounted read-only under the pod's volumes directory. A volume that fails keeps
// only the containers that mount it from starting.
func (r *Runtime) setUpImageVolumes(ctx context.Context, pod *corev1.Pod, sbConfig *runtimeapi.PodSandboxConfig) map[string]imageVolume {
	var out map[string]imageVolume
	// Volumes of one image and policy share one pull: a second attempt in the same sync
	// would only meet the first one's back-off.
	type pull struct {
		ref string
		ir  *imageResult
	}
	pulled := map[imageRequest]pull{}
	for _, v := range pod.Spec.Volumes {
		if v.Image == nil {
			continue
		}
		if out == nil {
			out = map[string]imageVolume{}
		}
		req := imageRequest{image: v.Image.Reference, policy: v.Image.PullPolicy}
		p, ok := pulled[req]
		if !ok {
			p.ref, p.ir = r.ensureImage(ctx, pod, req, sbConfig)
			pulled[req] = p
		}
		ref, ir := p.ref, p.ir
		if ir != nil {
			out[v.Name] = imageVolume{fail: ir}
			continue
		}
		target := filepath.Join(imageVolumeDir(r.podDir(pod.UID)), v.Name)
		err := errors.New("the container runtime cannot mount images")
		if r.cfg.ImageVolumes != nil {
			err = r.cfg.ImageVolumes.MountImage(ctx, string(pod.UID), ref, target)
		}
		if err != nil {
			// The message starts as CRI runtimes start theirs for a failed image mount.
			msg := fmt.Sprintf("%s: mount image %q of volume %q: %v", crierrors.ErrImageVolumeMountFailed, v.Image.Reference, v.Name, err)
			out[v.Name] = imageVolume{fail: &imageResult{reason: ErrCreateContainer.Error(), message: msg, err: ErrCreateContainer}}
			continue
		}
		out[v.Name] = imageVolume{path: target}
	}
	return out
}

// imageVolumeFailure is why container c cannot start for the image volumes it mounts
// (the last failed one, as upstream reports it), nil when they are all ready.
func imageVolumeFailure(c *corev1.Container, vols map[string]imageVolume) *imageResult {
	var last *imageResult
	for _, m := range c.VolumeMounts {
		if v, ok := vols[m.Name]; ok && v.fail != nil {
			last = v.fail
		}
	}
	return last
}

// imageVolumeEvent is the message of the Failed event of a container that an image
// volume keeps from starting: the reason of a failed pull, the message of a failed
// mount (the runtime's CreateContainer error upstream).
func imageVolumeEvent(ir *imageResult) string {
	if errors.Is(ir.err, ErrCreateContainer) {
		return "Error: " + ir.message
	}
	return "Error: " + ir.reason
}

// withImageVolumes is the pod's volumes with the host paths of its ready image volumes.
func withImageVolumes(volumes kubelet.PodVolumes, vols map[string]imageVolume) kubelet.PodVolumes {
	if len(vols) == 0 {
		return volumes
	}
	out := make(kubelet.PodVolumes, len(volumes)+len(vols))
	for k, v := range volumes {
		out[k] = v
	}
	for name, v := range vols {
		if v.fail == nil {
			out[name] = v.path
		}
	}
	return out
}

// tearDownImageVolumes unmounts the pod's image volumes and releases their images'
// snapshots; the pod's containers are gone by then.
func (r *Runtime) tearDownImageVolumes(ctx context.Context, uid types.UID) error {
	dir := imageVolumeDir(r.podDir(uid))
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return nil // MountImage makes it first: no image volume was set up
	}
	if r.cfg.ImageVolumes == nil {
		return nil
	}
	if err := r.cfg.ImageVolumes.UnmountImages(ctx, string(uid), dir); err != nil {
		return fmt.Errorf("unmount image volumes of pod %s: %w", uid, err)
	}
	return nil
}

// isImageVolume says whether the pod's volume name is an image volume.
func isImageVolume(pod *corev1.Pod, name string) bool {
	for i := range pod.Spec.Volumes {
		if v := &pod.Spec.Volumes[i]; v.Name == name {
			return v.Image != nil
		}
	}
	return false
}
