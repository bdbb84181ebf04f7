package driver

import (
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// singleNodeModes are the access modes of a volume attached to one node.
var singleNodeModes = map[csi.VolumeCapability_AccessMode_Mode]bool{
	csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER:        true,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY:   true,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER: true,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER:  true,
}

// supportedFSTypes are the filesystems NodeStageVolume can make and mount.
var supportedFSTypes = map[string]bool{"": true, "ext2": true, "ext3": true, "ext4": true, "xfs": true}

// checkCapability says why the driver cannot serve capability c, or nil. EBS volumes
// attach to one node, except io2 block volumes with Multi-Attach
// (MULTI_NODE_MULTI_WRITER, block only).
func checkCapability(c *csi.VolumeCapability) error {
	if c == nil {
		return fmt.Errorf("volume capability is empty")
	}
	mode := c.GetAccessMode().GetMode()
	if c.GetAccessMode() == nil {
		return fmt.Errorf("volume capability has no access mode")
	}
	switch {
	case c.GetBlock() != nil:
	case c.GetMount() != nil:
		if !supportedFSTypes[c.GetMount().GetFsType()] {
			return fmt.Errorf("filesystem %q is not supported (want ext2, ext3, ext4 or xfs)", c.GetMount().GetFsType())
		}
	default:
		return fmt.Errorf("volume capability has neither block nor mount access type")
	}
	if singleNodeModes[mode] {
		return nil
	}
	if mode == csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER && c.GetBlock() != nil {
		return nil
	}
	return fmt.Errorf("access mode %s is not supported for %s volumes", mode, accessTypeName(c))
}

func checkCapabilities(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return fmt.Errorf("volume capabilities are missing")
	}
	for _, c := range caps {
		if err := checkCapability(c); err != nil {
			return err
		}
	}
	return nil
}

// needsMultiAttach reports whether caps ask for a volume attached to many nodes.
func needsMultiAttach(caps []*csi.VolumeCapability) bool {
	for _, c := range caps {
		if c.GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER {
			return true
		}
	}
	return false
}

func accessTypeName(c *csi.VolumeCapability) string {
	if c.GetBlock() != nil {
		return "block"
	}
	return "mount"
}

func isBlock(c *csi.VolumeCapability) bool { return c.GetBlock() != nil }
