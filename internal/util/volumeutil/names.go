package volumeutil

import (
	"crypto/sha256"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// AttachmentName is the VolumeAttachment name of a CSI volume on a node:
// csi-<hex sha256 of volumeHandle, driver and node name>, as the kubelet and the
// attach/detach controller name it upstream.
func AttachmentName(volumeHandle, driver, nodeName string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(volumeHandle+driver+nodeName)))
}

// UniqueVolumeName is how nodes list a CSI volume in status.volumesInUse and
// status.volumesAttached: kubernetes.io/csi/<driver>^<volumeHandle>.
func UniqueVolumeName(driver, volumeHandle string) corev1.UniqueVolumeName {
	return corev1.UniqueVolumeName("kubernetes.io/csi/" + driver + "^" + volumeHandle)
}

// The protection finalizers, as upstream names them: a claim or volume that carries one
// is not removed while a pod uses it (the claim) or a claim is bound to it (the volume).
const (
	PVCProtectionFinalizer = "kubernetes.io/pvc-protection"
	PVProtectionFinalizer  = "kubernetes.io/pv-protection"
)
