package pluginmanager

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kubelab/kubelab/internal/util/atomicfile"
)

// VolumeDataFile is the file beside a staging or publish mount point that says which
// volume the mount point is for.
const VolumeDataFile = "vol_data.json"

// LifecyclePersistent is the volumeLifecycleMode of a volume from a PersistentVolume.
const LifecyclePersistent = "Persistent"

// VolumeData is the content of a vol_data.json. Beside a staging path it holds the
// volume handle and driver; beside a publish target also the PV name (specVolID), the
// node, the VolumeAttachment's name and the lifecycle mode.
type VolumeData struct {
	SpecVolID           string `json:"specVolID,omitempty"`
	VolumeHandle        string `json:"volumeHandle"`
	DriverName          string `json:"driverName"`
	NodeName            string `json:"nodeName,omitempty"`
	AttachmentID        string `json:"attachmentID,omitempty"`
	VolumeLifecycleMode string `json:"volumeLifecycleMode,omitempty"`
}

// ReadVolumeData reads the vol_data.json in dir.
func ReadVolumeData(dir string) (VolumeData, error) {
	var d VolumeData
	b, err := os.ReadFile(filepath.Join(dir, VolumeDataFile))
	if err != nil {
		return d, fmt.Errorf("read volume data: %w", err)
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("parse %s: %w", filepath.Join(dir, VolumeDataFile), err)
	}
	return d, nil
}

// writeVolumeData writes d as dir's vol_data.json (through a temporary file, so a reader
// never sees half of it).
func writeVolumeData(dir string, d VolumeData) error {
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode volume data: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, VolumeDataFile), b, 0o640); err != nil {
		return fmt.Errorf("volume data: %w", err)
	}
	return nil
}

// removeMountDir removes a mount point the driver left (it must be empty and unmounted by
// then), the vol_data.json beside it and their directory when nothing else is in it.
func removeMountDir(mountPath string) error {
	if err := os.Remove(mountPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove mount point: %w", err)
	}
	dir := filepath.Dir(mountPath)
	if err := os.Remove(filepath.Join(dir, VolumeDataFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove volume data: %w", err)
	}
	// Another file in dir is not this package's to remove.
	_ = os.Remove(dir)
	return nil
}
