package pvbinder

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// Event reasons of the PV controller, as upstream.
const (
	ReasonWaitForFirstConsumer = "WaitForFirstConsumer"
	ReasonExternalProvisioning = "ExternalProvisioning"
	ReasonProvisioningFailed   = "ProvisioningFailed"
	ReasonFailedBinding        = "FailedBinding"
	ReasonVolumeMismatch       = "VolumeMismatch"
	ReasonClaimLost            = "ClaimLost"
	ReasonClaimMisbound        = "ClaimMisbound"
	ReasonVolumeFailedDelete   = "VolumeFailedDelete"
	ReasonVolumeFailedRecycle  = "VolumeFailedRecycle"
	ReasonVolumeUnknownPolicy  = "VolumeUnknownReclaimPolicy"
)

// claimStep is what syncClaim does with a claim.
type claimStep int

const (
	// claimPending keeps the claim Pending (optionally with an event).
	claimPending claimStep = iota
	// claimWaitForConsumer keeps a WaitForFirstConsumer claim Pending until the
	// scheduler picks a node.
	claimWaitForConsumer
	// claimProvision hands the claim to the class's external provisioner.
	claimProvision
	// claimBind binds (or re-asserts the binding of) the claim and the volume.
	claimBind
	// claimLost marks a bound claim Lost.
	claimLost
)

// claimDecision is the outcome of a claim's decision, with the event to record.
type claimDecision struct {
	step        claimStep
	provisioner string // for claimProvision
	eventType   string
	reason      string
	message     string
}

func (d claimDecision) hasEvent() bool { return d.reason != "" }

// decideUnboundClaim decides for a claim without pv.kubernetes.io/bind-completed.
// class is the claim's StorageClass (nil when it names none or it does not exist);
// match is the volume chosen for it (nil when none): for a claim with
// spec.volumeName, that volume, or nil when it does not exist.
func decideUnboundClaim(claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, match *corev1.PersistentVolume) claimDecision {
	className := storagehelpers.GetPersistentVolumeClaimClass(claim)
	if claim.Spec.VolumeName != "" {
		// The user pre-bound the claim to a volume.
		switch {
		case match == nil:
			return claimDecision{step: claimPending}
		case match.Spec.ClaimRef == nil:
			if storagehelpers.CheckVolumeModeMismatches(&claim.Spec, &match.Spec) {
				return claimDecision{step: claimPending, eventType: corev1.EventTypeWarning, reason: ReasonVolumeMismatch,
					message: "Cannot bind PersistentVolume to requested PersistentVolumeClaim due to incompatible volumeMode."}
			}
			return claimDecision{step: claimBind}
		case storagehelpers.IsVolumeBoundToClaim(match, claim):
			return claimDecision{step: claimBind}
		default:
			return claimDecision{step: claimPending, eventType: corev1.EventTypeWarning, reason: ReasonFailedBinding,
				message: fmt.Sprintf("volume %q already bound to a different claim.", match.Name)}
		}
	}
	if match != nil {
		return claimDecision{step: claimBind}
	}
	if isDelayBinding(class) && !storagehelpers.IsDelayBindingProvisioning(claim) {
		return claimDecision{step: claimWaitForConsumer, eventType: corev1.EventTypeNormal, reason: ReasonWaitForFirstConsumer,
			message: "waiting for first consumer to be created before binding"}
	}
	switch {
	case className == "":
		return claimDecision{step: claimPending, eventType: corev1.EventTypeNormal, reason: ReasonFailedBinding,
			message: "no persistent volumes available for this claim and no storage class is set"}
	case class == nil:
		return claimDecision{step: claimPending, eventType: corev1.EventTypeWarning, reason: ReasonProvisioningFailed,
			message: fmt.Sprintf("storageclass.storage.k8s.io %q not found", className)}
	case class.Provisioner == storagehelpers.NotSupportedProvisioner || class.Provisioner == "":
		return claimDecision{step: claimPending, eventType: corev1.EventTypeNormal, reason: ReasonFailedBinding,
			message: fmt.Sprintf("no persistent volumes available for this claim and storage class %q does not provision", className)}
	}
	return claimDecision{step: claimProvision, provisioner: class.Provisioner, eventType: corev1.EventTypeNormal, reason: ReasonExternalProvisioning,
		message: fmt.Sprintf("Waiting for a volume to be created either by the external provisioner '%s' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.", class.Provisioner)}
}

// decideBoundClaim decides for a claim with pv.kubernetes.io/bind-completed; volume
// is the one its spec.volumeName names (nil when it does not exist).
func decideBoundClaim(claim *corev1.PersistentVolumeClaim, volume *corev1.PersistentVolume) claimDecision {
	switch {
	case claim.Spec.VolumeName == "":
		return claimDecision{step: claimLost, eventType: corev1.EventTypeWarning, reason: ReasonClaimLost,
			message: "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!"}
	case volume == nil:
		return claimDecision{step: claimLost, eventType: corev1.EventTypeWarning, reason: ReasonClaimLost,
			message: "Bound claim has lost its PersistentVolume. Data on the volume is lost!"}
	case volume.Spec.ClaimRef == nil, volume.Spec.ClaimRef.UID == claim.UID:
		return claimDecision{step: claimBind}
	default:
		return claimDecision{step: claimLost, eventType: corev1.EventTypeWarning, reason: ReasonClaimMisbound,
			message: "Two claims are bound to the same volume, this one is bound incorrectly"}
	}
}

// wantsDefaultClass says whether claim, unbound and matched by no volume, is given the
// default class: it names no class at all (an explicit "" asks for none).
func wantsDefaultClass(claim *corev1.PersistentVolumeClaim) bool {
	return claim.Spec.VolumeName == "" && !storagehelpers.PersistentVolumeClaimHasClass(claim)
}

// isDelayBinding says whether class binds WaitForFirstConsumer.
func isDelayBinding(class *storagev1.StorageClass) bool {
	return class != nil && class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
}

// volumeStep is what syncVolume does with a volume.
type volumeStep int

const (
	// volumeAvailable: no claim (or pre-bound to one not yet bound): phase Available.
	volumeAvailable volumeStep = iota
	// volumeWaitClaim: the claim exists but does not point back yet; its sync binds.
	volumeWaitClaim
	// volumeBound: the pair is bound: phase Bound.
	volumeBound
	// volumeReleased: the claim is gone: phase Released, then reclaim.
	volumeReleased
	// volumeUnbind: the claim is bound to another volume: drop the claimRef (or
	// only its UID when a user pre-bound it) and become Available.
	volumeUnbind
)

// decideVolume decides for a volume; claim is the claim its claimRef names, nil
// when that claim does not exist (or is another claim of the same name).
func decideVolume(volume *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) volumeStep {
	ref := volume.Spec.ClaimRef
	switch {
	case ref == nil, ref.UID == "":
		return volumeAvailable
	case claim == nil:
		return volumeReleased
	case claim.Spec.VolumeName == "":
		return volumeWaitClaim
	case claim.Spec.VolumeName == volume.Name:
		return volumeBound
	case metav1.HasAnnotation(volume.ObjectMeta, storagehelpers.AnnDynamicallyProvisioned) &&
		volume.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete:
		// Provisioned for this claim, which got bound elsewhere: not needed.
		return volumeReleased
	default:
		return volumeUnbind
	}
}

// reclaimDecision is what happens to a Released volume.
type reclaimDecision struct {
	// fail turns the volume Failed with the event below.
	fail    bool
	reason  string
	message string
}

// decideReclaim applies the reclaim policy of a Released volume. Retain keeps it;
// Delete of a dynamically provisioned volume is its provisioner's work (it deletes
// the storage asset and the PV); other cases fail as upstream does without an
// in-tree plugin.
func decideReclaim(volume *corev1.PersistentVolume) reclaimDecision {
	switch volume.Spec.PersistentVolumeReclaimPolicy {
	case corev1.PersistentVolumeReclaimRetain:
		return reclaimDecision{}
	case corev1.PersistentVolumeReclaimDelete:
		if metav1.HasAnnotation(volume.ObjectMeta, storagehelpers.AnnDynamicallyProvisioned) {
			return reclaimDecision{}
		}
		return reclaimDecision{fail: true, reason: ReasonVolumeFailedDelete,
			message: fmt.Sprintf("error getting deleter volume plugin for volume %q: no deletable volume plugin matched", volume.Name)}
	case corev1.PersistentVolumeReclaimRecycle:
		return reclaimDecision{fail: true, reason: ReasonVolumeFailedRecycle,
			message: "No recycler plugin found for the volume!"}
	default:
		return reclaimDecision{fail: true, reason: ReasonVolumeUnknownPolicy,
			message: "Volume has unrecognized PersistentVolumeReclaimPolicy"}
	}
}

// bindVolumeChange returns the volume bound to claim (claimRef, and
// pv.kubernetes.io/bound-by-controller when the controller made the binding) and
// whether it differs from volume.
func bindVolumeChange(volume *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolume, bool, error) {
	return storagehelpers.GetBindVolumeToClaim(volume, claim)
}

// bindClaimChange returns the claim bound to volume (spec.volumeName,
// pv.kubernetes.io/bind-completed and, when the controller chose the volume,
// pv.kubernetes.io/bound-by-controller) and whether it differs from claim.
func bindClaimChange(claim *corev1.PersistentVolumeClaim, volume *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, bool) {
	out := claim.DeepCopy()
	dirty := false
	if out.Spec.VolumeName != volume.Name {
		out.Spec.VolumeName = volume.Name
		metav1.SetMetaDataAnnotation(&out.ObjectMeta, storagehelpers.AnnBoundByController, "yes")
		dirty = true
	}
	if !metav1.HasAnnotation(out.ObjectMeta, storagehelpers.AnnBindCompleted) {
		metav1.SetMetaDataAnnotation(&out.ObjectMeta, storagehelpers.AnnBindCompleted, "yes")
		dirty = true
	}
	return out, dirty
}

// boundClaimStatus returns the claim's status once bound to volume: phase Bound,
// access modes from the volume, and the volume's capacity when the claim becomes
// Bound now (a later difference is a resize in progress and is kept).
func boundClaimStatus(claim *corev1.PersistentVolumeClaim, volume *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, bool) {
	out := claim.DeepCopy()
	dirty := false
	if out.Status.Phase != corev1.ClaimBound {
		out.Status.Phase = corev1.ClaimBound
		if q, ok := volume.Spec.Capacity[corev1.ResourceStorage]; ok {
			out.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: q}
		}
		dirty = true
	}
	if !sameModes(out.Status.AccessModes, volume.Spec.AccessModes) {
		out.Status.AccessModes = append([]corev1.PersistentVolumeAccessMode(nil), volume.Spec.AccessModes...)
		dirty = true
	}
	if _, ok := out.Status.Capacity[corev1.ResourceStorage]; !ok {
		if q, ok := volume.Spec.Capacity[corev1.ResourceStorage]; ok {
			out.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: q}
			dirty = true
		}
	}
	return out, dirty
}

func sameModes(a, b []corev1.PersistentVolumeAccessMode) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// provisionAnnotations returns the claim annotated for provisioner and whether it
// changed.
func provisionAnnotations(claim *corev1.PersistentVolumeClaim, provisioner string) (*corev1.PersistentVolumeClaim, bool) {
	if claim.Annotations[storagehelpers.AnnStorageProvisioner] == provisioner &&
		claim.Annotations[storagehelpers.AnnBetaStorageProvisioner] == provisioner {
		return claim, false
	}
	out := claim.DeepCopy()
	metav1.SetMetaDataAnnotation(&out.ObjectMeta, storagehelpers.AnnStorageProvisioner, provisioner)
	metav1.SetMetaDataAnnotation(&out.ObjectMeta, storagehelpers.AnnBetaStorageProvisioner, provisioner)
	return out, true
}
