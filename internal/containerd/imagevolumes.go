package containerd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	containerdtypes "github.com/containerd/containerd/api/types"
	"github.com/moby/sys/mountinfo"
	digest "github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	// namespaceHeader is the gRPC metadata key that names the namespace of a call to
	// containerd's own API.
	namespaceHeader = "containerd-namespace"
	// snapshotter is the snapshotter the CRI plugin unpacks images with (config.go).
	snapshotter = "overlayfs"
	// labelGCRoot keeps a snapshot from containerd's garbage collector while it has it.
	labelGCRoot = "containerd.io/gc.root"
	// LabelImageVolumePod names, on the view of an image volume, the pod it is mounted for.
	LabelImageVolumePod = "kubelab.dev/image-volume-pod-uid"
)

// ImageVolumes mounts pulled images' filesystems for the kubelet's image volumes: the
// work containerd 2.1's CRI does for a mount naming an image, which the CRI of Debian's
// containerd 1.6 does not. An image volume is a read-only View snapshot (snapshotter
// overlayfs, namespace k8s.io) whose parent is the image's chain ID, the top snapshot CRI
// unpacked the image into; its key is the target directory, and it is mounted there by
// this process (the machine's mount namespace, which containerd's runc binds from).
type ImageVolumes struct {
	images    runtimeapi.ImageServiceClient
	snapshots snapshotsapi.SnapshotsClient
	now       func() time.Time
}

// ImageVolumes returns the image volume mounter of the client's containerd.
func (c *Client) ImageVolumes() *ImageVolumes {
	return &ImageVolumes{images: c.Image, snapshots: c.Snapshots, now: time.Now}
}

func inNamespace(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, namespaceHeader, criNamespace)
}

// MountImage makes the filesystem of the pulled image imageID (the id CRI PullImage and
// ImageStatus give) available read-only at target, for the pod uid. A target that is
// already mounted is left as it is.
func (v *ImageVolumes) MountImage(ctx context.Context, uid, imageID, target string) error {
	if err := os.MkdirAll(target, 0o750); err != nil {
		return fmt.Errorf("create %s: %w", target, err)
	}
	if mounted, err := mountinfo.Mounted(target); err != nil {
		return fmt.Errorf("is %s mounted: %w", target, err)
	} else if mounted {
		return nil
	}
	chain, err := v.chainID(ctx, imageID)
	if err != nil {
		return err
	}
	ctx = inNamespace(ctx)
	labels := map[string]string{labelGCRoot: v.now().UTC().Format(time.RFC3339), LabelImageVolumePod: uid}
	resp, err := v.snapshots.View(ctx, &snapshotsapi.ViewSnapshotRequest{Snapshotter: snapshotter, Key: target, Parent: chain, Labels: labels})
	mounts := resp.GetMounts()
	if status.Code(err) == codes.AlreadyExists {
		// Made by an earlier call whose mount did not happen (or was undone).
		var m *snapshotsapi.MountsResponse
		m, err = v.snapshots.Mounts(ctx, &snapshotsapi.MountsRequest{Snapshotter: snapshotter, Key: target})
		mounts = m.GetMounts()
	}
	if err != nil {
		return fmt.Errorf("view snapshot of image %s (chain %s): %w", imageID, chain, err)
	}
	if err := mountAll(mounts, target); err != nil {
		_, rerr := v.snapshots.Remove(ctx, &snapshotsapi.RemoveSnapshotRequest{Snapshotter: snapshotter, Key: target})
		if rerr != nil && status.Code(rerr) != codes.NotFound {
			err = errors.Join(err, fmt.Errorf("remove snapshot %s: %w", target, rerr))
		}
		return err
	}
	return nil
}

// UnmountImages undoes the MountImage calls for the pod uid: every view labelled with
// it is unmounted from its target (its key) and removed, and whatever is still mounted
// under dir (the pod's image volume directory) is unmounted; then dir is removed.
func (v *ImageVolumes) UnmountImages(ctx context.Context, uid, dir string) error {
	ctx = inNamespace(ctx)
	views, err := v.views(ctx, uid)
	if err != nil {
		return err
	}
	var errs []error
	for _, key := range views {
		if err := unmountAndRemove(key); err != nil {
			errs = append(errs, err)
			continue // never drop the snapshot under a mount
		}
		_, err := v.snapshots.Remove(ctx, &snapshotsapi.RemoveSnapshotRequest{Snapshotter: snapshotter, Key: key})
		if err != nil && status.Code(err) != codes.NotFound {
			errs = append(errs, fmt.Errorf("remove snapshot %s: %w", key, err))
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range entries {
		if err := unmountAndRemove(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

// views lists the keys of the image volume views of pod uid.
func (v *ImageVolumes) views(ctx context.Context, uid string) ([]string, error) {
	stream, err := v.snapshots.List(ctx, &snapshotsapi.ListSnapshotsRequest{Snapshotter: snapshotter,
		Filters: []string{fmt.Sprintf("labels.%q==%q", LabelImageVolumePod, uid)}})
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	var keys []string
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return keys, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list snapshots: %w", err)
		}
		for _, info := range resp.GetInfo() {
			// The filter is containerd's; the label is checked again here.
			if info.GetLabels()[LabelImageVolumePod] == uid {
				keys = append(keys, info.GetName())
			}
		}
	}
}

// chainID is the chain ID of the image's layers, the key of the snapshot CRI unpacked
// it into: the chainID of CRI's verbose image status, or computed from the diff IDs of
// the image config it carries.
func (v *ImageVolumes) chainID(ctx context.Context, imageID string) (string, error) {
	resp, err := v.images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: imageID}, Verbose: true})
	if err != nil {
		return "", fmt.Errorf("image status of %s: %w", imageID, err)
	}
	if resp.GetImage() == nil {
		return "", fmt.Errorf("image %s is not present", imageID)
	}
	chain, err := chainIDOf(resp.GetInfo())
	if err != nil {
		return "", fmt.Errorf("image %s: %w", imageID, err)
	}
	return chain, nil
}

// chainIDOf reads the chain ID from the "info" entry of containerd's verbose image
// status ({"chainID": …, "imageSpec": {"rootfs": {"diff_ids": […]}}}).
func chainIDOf(info map[string]string) (string, error) {
	raw, ok := info["info"]
	if !ok {
		return "", errors.New("the runtime's image status has no info")
	}
	var v struct {
		ChainID   string `json:"chainID"`
		ImageSpec struct {
			RootFS struct {
				DiffIDs []digest.Digest `json:"diff_ids"`
			} `json:"rootfs"`
		} `json:"imageSpec"`
	}
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return "", fmt.Errorf("image status info: %w", err)
	}
	if v.ChainID != "" {
		return v.ChainID, nil
	}
	if len(v.ImageSpec.RootFS.DiffIDs) == 0 {
		return "", errors.New("the image has no layers")
	}
	return identity.ChainID(v.ImageSpec.RootFS.DiffIDs).String(), nil
}

// mountAll mounts the snapshot's mounts at target, in order, read-only; on failure what
// it mounted is unmounted.
func mountAll(mounts []*containerdtypes.Mount, target string) error {
	if len(mounts) == 0 {
		return errors.New("the snapshot has no mounts")
	}
	for i, m := range mounts {
		a, err := mountArgsOf(m)
		if err != nil {
			return err
		}
		if err := a.mount(target); err != nil {
			for range i + 1 {
				_ = unix.Unmount(target, unix.MNT_DETACH)
			}
			return fmt.Errorf("mount %s %s at %s: %w", m.GetType(), m.GetSource(), target, err)
		}
	}
	return nil
}

// mountArgs are the arguments of mount(2) for one snapshot mount.
type mountArgs struct {
	source, fstype string
	flags          uintptr
	data           string
	// bind: a bind mount, made read-only by a remount (a bind ignores MS_RDONLY).
	bind bool
}

func (a mountArgs) mount(target string) error {
	if err := unix.Mount(a.source, target, a.fstype, a.flags, a.data); err != nil {
		return err
	}
	if a.bind {
		if err := unix.Mount("", target, "", a.flags|unix.MS_REMOUNT, ""); err != nil {
			_ = unix.Unmount(target, unix.MNT_DETACH)
			return fmt.Errorf("remount read-only: %w", err)
		}
	}
	return nil
}

// mountFlags are the fstab options that are mount(2) flags; the others go to the
// filesystem as data.
var mountFlags = map[string]struct {
	set   bool
	flags uintptr
}{
	"ro": {true, unix.MS_RDONLY}, "rw": {false, unix.MS_RDONLY},
	"bind": {true, unix.MS_BIND}, "rbind": {true, unix.MS_BIND | unix.MS_REC},
	"nosuid": {true, unix.MS_NOSUID}, "suid": {false, unix.MS_NOSUID},
	"nodev": {true, unix.MS_NODEV}, "dev": {false, unix.MS_NODEV},
	"noexec": {true, unix.MS_NOEXEC}, "exec": {false, unix.MS_NOEXEC},
	"noatime": {true, unix.MS_NOATIME}, "atime": {false, unix.MS_NOATIME},
	"nodiratime": {true, unix.MS_NODIRATIME}, "relatime": {true, unix.MS_RELATIME},
	"strictatime": {true, unix.MS_STRICTATIME}, "sync": {true, unix.MS_SYNCHRONOUS},
	"dirsync": {true, unix.MS_DIRSYNC},
}

// mountArgsOf turns a snapshot's mount (containerd's type, source and fstab-style
// options) into mount(2)'s arguments, always read-only: a view's single-layer image is a
// bind mount of the layer's directory ("ro", "rbind"), a view of more layers an overlay
// of their directories ("lowerdir=…").
func mountArgsOf(m *containerdtypes.Mount) (mountArgs, error) {
	a := mountArgs{source: m.GetSource(), fstype: m.GetType()}
	var data []string
	for _, o := range m.GetOptions() {
		f, ok := mountFlags[o]
		switch {
		case !ok:
			data = append(data, o)
		case f.set:
			a.flags |= f.flags
		default:
			a.flags &^= f.flags
		}
	}
	a.flags |= unix.MS_RDONLY
	a.bind = a.flags&unix.MS_BIND != 0 || m.GetType() == "bind"
	if a.bind {
		a.flags |= unix.MS_BIND
		a.fstype = ""
	}
	if a.fstype == "" && !a.bind {
		return mountArgs{}, fmt.Errorf("mount of %s has no type", m.GetSource())
	}
	a.data = strings.Join(data, ",")
	if len(a.data) >= os.Getpagesize() {
		return mountArgs{}, fmt.Errorf("mount options of %s are longer than a page (%d bytes): the image has too many layers", m.GetSource(), len(a.data))
	}
	return a, nil
}

// unmountAndRemove unmounts dir (every mount stacked there) and removes it.
func unmountAndRemove(dir string) error {
	for {
		mounted, err := mountinfo.Mounted(dir)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("is %s mounted: %w", dir, err)
		}
		if !mounted {
			break
		}
		if err := unix.Unmount(dir, 0); err != nil {
			return fmt.Errorf("unmount %s: %w", dir, err)
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}
