package attacher

import (
	"fmt"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	csiclient "github.com/kubelab/kubelab/internal/csi/client"
)

// Names the attacher reads and writes, as upstream.
const (
	// AnnNodeID on a VolumeAttachment keeps the node's CSI id for the detach.
	AnnNodeID = "csi.alpha.kubernetes.io/node-id"
)

// Finalizer is the attacher's finalizer for driver: external-attacher/<driver with
// every character other than a letter, digit or dash turned into a dash>.
func Finalizer(driver string) string {
	var b strings.Builder
	for _, r := range driver {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return "external-attacher/" + b.String()
}

func hasFinalizer(list []string, f string) bool {
	for _, x := range list {
		if x == f {
			return true
		}
	}
	return false
}

func withoutFinalizer(list []string, f string) []string {
	out := make([]string, 0, len(list))
	for _, x := range list {
		if x != f {
			out = append(out, x)
		}
	}
	return out
}

// step is what the attacher does with a VolumeAttachment.
type step int

const (
	stepNothing step = iota
	stepAttach
	stepDetach
)

// decideAttachment decides for a VolumeAttachment: attach one of this driver that
// is not attached (or lacks the finalizer), detach one being deleted that still
// holds the finalizer.
func decideAttachment(va *storagev1.VolumeAttachment, driver string) step {
	if va.Spec.Attacher != driver {
		return stepNothing
	}
	fin := hasFinalizer(va.Finalizers, Finalizer(driver))
	if va.DeletionTimestamp != nil {
		if fin {
			return stepDetach
		}
		return stepNothing
	}
	if va.Status.Attached && fin {
		return stepNothing
	}
	return stepAttach
}

// decideVolume says whether the PV's finalizer can go: the PV is being deleted and
// no VolumeAttachment of this driver names it.
func decideVolume(pv *corev1.PersistentVolume, driver string, attachments int) bool {
	return pv.DeletionTimestamp != nil && hasFinalizer(pv.Finalizers, Finalizer(driver)) && attachments == 0
}

// nodeID finds the node's id for driver: its CSINode entry, else (for a detach, which
// passes the VolumeAttachment) the id the attach kept in the attachment's
// csi.alpha.kubernetes.io/node-id annotation. The attacher reads no Node objects.
func nodeID(driver, nodeName string, csiNode *storagev1.CSINode, va *storagev1.VolumeAttachment) (string, error) {
	if csiNode != nil {
		for _, d := range csiNode.Spec.Drivers {
			if d.Name == driver && d.NodeID != "" {
				return d.NodeID, nil
			}
		}
	}
	if va != nil && va.Annotations[AnnNodeID] != "" {
		return va.Annotations[AnnNodeID], nil
	}
	return "", fmt.Errorf("node %q has no id for driver %s: its CSINode does not list the driver", nodeName, driver)
}

// publishRequest is the ControllerPublishVolume request for a PV on a node.
func publishRequest(pv *corev1.PersistentVolume, nodeID string) (*csi.ControllerPublishVolumeRequest, error) {
	if pv.Spec.CSI == nil {
		return nil, fmt.Errorf("persistentvolume %s is not a CSI volume", pv.Name)
	}
	capability, err := csiclient.PVCapability(pv)
	if err != nil {
		return nil, err
	}
	readOnly := pv.Spec.CSI.ReadOnly
	if len(pv.Spec.AccessModes) == 1 && pv.Spec.AccessModes[0] == corev1.ReadOnlyMany {
		readOnly = true
	}
	return &csi.ControllerPublishVolumeRequest{
		VolumeId:         pv.Spec.CSI.VolumeHandle,
		NodeId:           nodeID,
		VolumeCapability: capability,
		Readonly:         readOnly,
		VolumeContext:    pv.Spec.CSI.VolumeAttributes,
	}, nil
}
