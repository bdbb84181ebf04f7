package provisioner

import (
	"fmt"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	csiclient "github.com/kubelab/kubelab/internal/csi/client"
)

// Keys of the StorageClass parameters and volume attributes the provisioner itself
// reads or writes, as upstream.
const (
	prefixedParams      = "csi.storage.k8s.io/"
	ParamFSType         = "csi.storage.k8s.io/fstype"
	ParamPVCName        = "csi.storage.k8s.io/pvc/name"
	ParamPVCNamespace   = "csi.storage.k8s.io/pvc/namespace"
	ParamPVName         = "csi.storage.k8s.io/pv/name"
	AttrProvisionerID   = "storage.kubernetes.io/csiProvisionerIdentity"
	AnnProvisionedBy    = storagehelpers.AnnDynamicallyProvisioned
	FinalizerProvisoner = storagehelpers.PVDeletionProtectionFinalizer
)

// volumeName is the PV (and CSI volume) name of a claim: <prefix>-<claim uid>,
// the UID cut to uuidLength characters when positive.
func volumeName(prefix string, claim *corev1.PersistentVolumeClaim, uuidLength int) string {
	uid := string(claim.UID)
	if uuidLength > 0 && uuidLength < len(uid) {
		uid = uid[:uuidLength]
	}
	return prefix + "-" + uid
}

// shouldProvision says whether the claim is this driver's to provision now, and if
// not, why (for logs).
func shouldProvision(claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, driver string) (bool, string) {
	ann := claim.Annotations[storagehelpers.AnnStorageProvisioner]
	if ann == "" {
		ann = claim.Annotations[storagehelpers.AnnBetaStorageProvisioner]
	}
	switch {
	case claim.Spec.VolumeName != "":
		return false, "claim is bound"
	case ann != driver:
		return false, fmt.Sprintf("claim is for provisioner %q", ann)
	case claim.DeletionTimestamp != nil:
		return false, "claim is being deleted"
	case class == nil:
		return false, "storage class not found"
	case class.Provisioner != driver:
		return false, fmt.Sprintf("storage class %s is for provisioner %q", class.Name, class.Provisioner)
	case class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer &&
		claim.Annotations[storagehelpers.AnnSelectedNode] == "":
		return false, "waiting for the scheduler to select a node"
	}
	return true, ""
}

// createInput is what a CreateVolume request is built from.
type createInput struct {
	name                string
	claim               *corev1.PersistentVolumeClaim
	class               *storagev1.StorageClass
	defaultFSType       string
	extraCreateMetadata bool
	topology            *csi.TopologyRequirement
	source              *csi.VolumeContentSource
}

// createRequest builds the CreateVolume request of a claim. It fails, naming the
// field, when the claim asks for no size or an unknown access mode.
func createRequest(in createInput) (*csi.CreateVolumeRequest, string, error) {
	q, ok := in.claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok || q.Sign() <= 0 {
		return nil, "", fmt.Errorf("claim %s/%s: spec.resources.requests.storage must be a positive size", in.claim.Namespace, in.claim.Name)
	}
	params := map[string]string{}
	fsType := ""
	for k, v := range in.class.Parameters {
		lk := strings.ToLower(k)
		if lk == ParamFSType {
			fsType = v
			continue
		}
		if strings.HasPrefix(lk, prefixedParams) {
			continue // secrets and other provisioner-only keys never reach the driver
		}
		params[k] = v
	}
	if in.extraCreateMetadata {
		params[ParamPVCName] = in.claim.Name
		params[ParamPVCNamespace] = in.claim.Namespace
		params[ParamPVName] = in.name
	}
	block := in.claim.Spec.VolumeMode != nil && *in.claim.Spec.VolumeMode == corev1.PersistentVolumeBlock
	if block {
		fsType = ""
	} else if fsType == "" {
		fsType = in.defaultFSType
	}
	caps, err := csiclient.Capabilities(in.claim.Spec.AccessModes, in.claim.Spec.VolumeMode, fsType, in.class.MountOptions)
	if err != nil {
		return nil, "", fmt.Errorf("claim %s/%s: %w", in.claim.Namespace, in.claim.Name, err)
	}
	req := &csi.CreateVolumeRequest{
		Name:                      in.name,
		CapacityRange:             &csi.CapacityRange{RequiredBytes: q.Value()},
		VolumeCapabilities:        caps,
		Parameters:                params,
		AccessibilityRequirements: in.topology,
		VolumeContentSource:       in.source,
	}
	return req, fsType, nil
}

// pvInput is what a provisioned PV is built from.
type pvInput struct {
	name     string
	claim    *corev1.PersistentVolumeClaim
	class    *storagev1.StorageClass
	driver   string
	identity string
	fsType   string
	volume   *csi.Volume
}

// buildPV is the PV of a provisioned volume: pre-bound to its claim (claimRef with
// the claim's UID), annotated pv.kubernetes.io/provisioned-by, with the deletion
// finalizer under reclaim policy Delete, capacity from the driver (else the
// request), node affinity from the volume's accessible topology.
func buildPV(in pvInput) *corev1.PersistentVolume {
	bytes := in.volume.GetCapacityBytes()
	if bytes == 0 {
		q := in.claim.Spec.Resources.Requests[corev1.ResourceStorage]
		bytes = q.Value()
	}
	policy := corev1.PersistentVolumeReclaimDelete
	if in.class.ReclaimPolicy != nil {
		policy = *in.class.ReclaimPolicy
	}
	mode := corev1.PersistentVolumeFilesystem
	if in.claim.Spec.VolumeMode != nil {
		mode = *in.claim.Spec.VolumeMode
	}
	attrs := map[string]string{}
	for k, v := range in.volume.GetVolumeContext() {
		attrs[k] = v
	}
	attrs[AttrProvisionerID] = in.identity
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        in.name,
			Annotations: map[string]string{AnnProvisionedBy: in.driver},
		},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes: append([]corev1.PersistentVolumeAccessMode(nil), in.claim.Spec.AccessModes...),
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(bytes, resource.BinarySI)},
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: in.claim.Namespace, Name: in.claim.Name, UID: in.claim.UID, ResourceVersion: in.claim.ResourceVersion,
			},
			PersistentVolumeReclaimPolicy: policy,
			StorageClassName:              in.class.Name,
			MountOptions:                  append([]string(nil), in.class.MountOptions...),
			VolumeMode:                    &mode,
			NodeAffinity:                  nodeAffinity(in.volume.GetAccessibleTopology()),
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: in.driver, VolumeHandle: in.volume.GetVolumeId(), FSType: in.fsType, VolumeAttributes: attrs,
			}},
		},
	}
	if policy == corev1.PersistentVolumeReclaimDelete {
		pv.Finalizers = []string{FinalizerProvisoner}
	}
	return pv
}

// deleteStep is what the provisioner does with one of its PVs.
type deleteStep int

const (
	deleteNothing deleteStep = iota
	// deleteVolume deletes the storage asset, then the PV.
	deleteVolume
	// deleteDropFinalizer only removes the provisioner's finalizer (Retain, or the
	// asset is already gone).
	deleteDropFinalizer
)

// decideDelete decides for a PV: under Delete, a Released volume (or one being
// deleted that is not Bound) is deleted; under any other policy the finalizer, if
// any, goes.
func decideDelete(pv *corev1.PersistentVolume, driver string) deleteStep {
	if pv.Annotations[AnnProvisionedBy] != driver || pv.Spec.CSI == nil || pv.Spec.CSI.Driver != driver {
		return deleteNothing
	}
	hasFinalizer := false
	for _, f := range pv.Finalizers {
		if f == FinalizerProvisoner {
			hasFinalizer = true
		}
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		if hasFinalizer {
			return deleteDropFinalizer
		}
		return deleteNothing
	}
	switch {
	case pv.DeletionTimestamp != nil && !hasFinalizer:
		return deleteNothing // deleted already; the PV object is on its way out
	case pv.Status.Phase == corev1.VolumeReleased:
		return deleteVolume
	case pv.DeletionTimestamp != nil && pv.Status.Phase != corev1.VolumeBound:
		return deleteVolume
	}
	return deleteNothing
}
