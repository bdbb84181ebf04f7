package client

import (
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
)

// AccessMode maps a Kubernetes access mode to the CSI one.
func AccessMode(m corev1.PersistentVolumeAccessMode) (csi.VolumeCapability_AccessMode_Mode, error) {
	switch m {
	case corev1.ReadWriteOnce:
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, nil
	case corev1.ReadWriteOncePod:
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER, nil
	case corev1.ReadOnlyMany:
		return csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY, nil
	case corev1.ReadWriteMany:
		return csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, nil
	}
	return csi.VolumeCapability_AccessMode_UNKNOWN, fmt.Errorf("unknown access mode %q", m)
}

// Capabilities are the CSI volume capabilities of a volume with these access modes
// and mode: a block capability for Block, else a mount one with fsType and
// mountFlags. One capability per access mode, as the provisioner sends them.
func Capabilities(modes []corev1.PersistentVolumeAccessMode, mode *corev1.PersistentVolumeMode, fsType string, mountFlags []string) ([]*csi.VolumeCapability, error) {
	if len(modes) == 0 {
		return nil, fmt.Errorf("no access modes")
	}
	out := make([]*csi.VolumeCapability, 0, len(modes))
	for _, m := range modes {
		am, err := AccessMode(m)
		if err != nil {
			return nil, err
		}
		c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: am}}
		if mode != nil && *mode == corev1.PersistentVolumeBlock {
			c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
		} else {
			c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fsType, MountFlags: mountFlags}}
		}
		out = append(out, c)
	}
	return out, nil
}

// PVCapability is the single capability of an existing CSI PV, as the attacher and
// resizer send it: the PV's strongest access mode (RWX, then ROX, then RWOP, then RWO).
func PVCapability(pv *corev1.PersistentVolume) (*csi.VolumeCapability, error) {
	if pv.Spec.CSI == nil {
		return nil, fmt.Errorf("persistentvolume %s is not a CSI volume", pv.Name)
	}
	modes := pv.Spec.AccessModes
	pick := corev1.PersistentVolumeAccessMode("")
	for _, want := range []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadOnlyMany, corev1.ReadWriteOncePod, corev1.ReadWriteOnce} {
		for _, m := range modes {
			if m == want && pick == "" {
				pick = m
			}
		}
	}
	if pick == "" {
		return nil, fmt.Errorf("persistentvolume %s has no access modes", pv.Name)
	}
	caps, err := Capabilities([]corev1.PersistentVolumeAccessMode{pick}, pv.Spec.VolumeMode, pv.Spec.CSI.FSType, pv.Spec.MountOptions)
	if err != nil {
		return nil, fmt.Errorf("persistentvolume %s: %w", pv.Name, err)
	}
	return caps[0], nil
}
