package pvbinder

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/kubelab/kubelab/internal/storageclass"
)

// syncClaim brings one claim (namespace/name) to its desired state.
func (c *Controller) syncClaim(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	claim, err := c.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil // its volume's sync handles the release
	}
	if err != nil {
		return err
	}
	var volume *corev1.PersistentVolume
	if claim.Spec.VolumeName != "" {
		volume, err = c.volumes.Get(claim.Spec.VolumeName)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	var d claimDecision
	if metav1.HasAnnotation(claim.ObjectMeta, storagehelpers.AnnBindCompleted) {
		d = decideBoundClaim(claim, volume)
	} else {
		class, err := c.claimClass(claim)
		if err != nil {
			return err
		}
		if claim.Spec.VolumeName == "" {
			volume, err = c.findMatch(claim, isDelayBinding(class))
			if err != nil {
				return err
			}
		}
		if volume == nil && wantsDefaultClass(claim) {
			if assigned, err := c.assignDefaultClass(ctx, claim); assigned || err != nil {
				return err // the claim's update brings it back
			}
		}
		d = decideUnboundClaim(claim, class, volume)
	}
	if d.hasEvent() {
		c.recorder.Event(claim, d.eventType, d.reason, d.message)
	}
	switch d.step {
	case claimBind:
		return c.bind(ctx, volume, claim)
	case claimLost:
		return c.setClaimPhase(ctx, claim, corev1.ClaimLost)
	case claimProvision:
		if _, changed := provisionAnnotations(claim, d.provisioner); changed {
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
				storagehelpers.AnnStorageProvisioner: d.provisioner, storagehelpers.AnnBetaStorageProvisioner: d.provisioner}}})
			claim, err = c.client.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
			if err != nil {
				return fmt.Errorf("annotate claim %s for provisioner %s: %w", key, d.provisioner, err)
			}
			c.log.InfoContext(ctx, "claim handed to external provisioner", "claim", key, "provisioner", d.provisioner)
		}
		return c.setClaimPhase(ctx, claim, corev1.ClaimPending)
	default:
		return c.setClaimPhase(ctx, claim, corev1.ClaimPending)
	}
}

// assignDefaultClass gives a claim that names no class the default class, if there is
// one, as upstream's controller does for claims created before a default existed or
// past an API server that did not set it.
func (c *Controller) assignDefaultClass(ctx context.Context, claim *corev1.PersistentVolumeClaim) (bool, error) {
	classes, err := c.classes.List(labels.Everything())
	if err != nil {
		return false, err
	}
	def := storageclass.Default(classes)
	if def == nil {
		return false, nil
	}
	claim = claim.DeepCopy()
	claim.Spec.StorageClassName = &def.Name
	if _, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, claim, metav1.UpdateOptions{}); err != nil {
		return false, fmt.Errorf("assign default storage class %s to claim %s/%s: %w", def.Name, claim.Namespace, claim.Name, err)
	}
	c.log.InfoContext(ctx, "default storage class assigned", "claim", claim.Namespace+"/"+claim.Name, "class", def.Name)
	return true, nil
}

// claimClass returns the claim's StorageClass, nil when it names none or it does not
// exist.
func (c *Controller) claimClass(claim *corev1.PersistentVolumeClaim) (*storagev1.StorageClass, error) {
	name := storagehelpers.GetPersistentVolumeClaimClass(claim)
	if name == "" {
		return nil, nil
	}
	class, err := c.classes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return class, err
}

// findMatch picks the smallest fitting volume for claim; under delayBinding only a
// volume pre-bound to the claim is taken (the scheduler binds the others).
func (c *Controller) findMatch(claim *corev1.PersistentVolumeClaim, delayBinding bool) (*corev1.PersistentVolume, error) {
	vols, err := c.volumes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	candidates := vols[:0:0]
	for _, v := range vols {
		if v.DeletionTimestamp == nil && v.Status.Phase != corev1.VolumeReleased && v.Status.Phase != corev1.VolumeFailed {
			candidates = append(candidates, v)
		}
	}
	return storagehelpers.FindMatchingVolume(claim, candidates, nil, nil, delayBinding, true)
}

// bind makes volume and claim point at each other and both Bound, in upstream's
// order: the volume's claimRef, the volume's phase, the claim's volumeName and
// annotations, the claim's phase. Every step is skipped when already done.
func (c *Controller) bind(ctx context.Context, volume *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) error {
	bound, dirty, err := bindVolumeChange(volume, claim)
	if err != nil {
		return err
	}
	if dirty {
		if volume, err = c.client.CoreV1().PersistentVolumes().Update(ctx, bound, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("bind volume %s to claim %s/%s: %w", volume.Name, claim.Namespace, claim.Name, err)
		}
	}
	if volume, err = c.setVolumePhase(ctx, volume, corev1.VolumeBound, ""); err != nil {
		return err
	}
	if updated, dirty := bindClaimChange(claim, volume); dirty {
		if claim, err = c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("bind claim %s/%s to volume %s: %w", claim.Namespace, claim.Name, volume.Name, err)
		}
	}
	if updated, dirty := boundClaimStatus(claim, volume); dirty {
		if _, err = c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("claim %s/%s status Bound: %w", claim.Namespace, claim.Name, err)
		}
		c.log.InfoContext(ctx, "claim bound", "claim", claim.Namespace+"/"+claim.Name, "volume", volume.Name)
	}
	return nil
}

func (c *Controller) setClaimPhase(ctx context.Context, claim *corev1.PersistentVolumeClaim, phase corev1.PersistentVolumeClaimPhase) error {
	if claim.Status.Phase == phase {
		return nil
	}
	out := claim.DeepCopy()
	out.Status.Phase = phase
	if _, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).UpdateStatus(ctx, out, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("claim %s/%s phase %s: %w", claim.Namespace, claim.Name, phase, err)
	}
	return nil
}

func (c *Controller) setVolumePhase(ctx context.Context, volume *corev1.PersistentVolume, phase corev1.PersistentVolumePhase, message string) (*corev1.PersistentVolume, error) {
	if volume.Status.Phase == phase && volume.Status.Message == message {
		return volume, nil
	}
	out := volume.DeepCopy()
	if out.Status.Phase != phase {
		now := metav1.NewTime(time.Now())
		out.Status.LastPhaseTransitionTime = &now
	}
	out.Status.Phase = phase
	out.Status.Message = message
	updated, err := c.client.CoreV1().PersistentVolumes().UpdateStatus(ctx, out, metav1.UpdateOptions{})
	if err != nil {
		return volume, fmt.Errorf("volume %s phase %s: %w", volume.Name, phase, err)
	}
	return updated, nil
}

// syncVolume brings one volume to its desired state.
func (c *Controller) syncVolume(ctx context.Context, name string) error {
	volume, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	claim, err := c.claimOf(ctx, volume)
	if err != nil {
		return err
	}
	switch decideVolume(volume, claim) {
	case volumeAvailable:
		_, err = c.setVolumePhase(ctx, volume, corev1.VolumeAvailable, "")
		return err
	case volumeWaitClaim:
		if storagehelpers.CheckVolumeModeMismatches(&claim.Spec, &volume.Spec) {
			c.recorder.Event(volume, corev1.EventTypeWarning, ReasonVolumeMismatch,
				"Cannot bind PersistentVolume to requested PersistentVolumeClaim due to incompatible volumeMode.")
			return nil
		}
		c.claimQueue.Add(claim.Namespace + "/" + claim.Name)
		return nil
	case volumeBound:
		_, err = c.setVolumePhase(ctx, volume, corev1.VolumeBound, "")
		return err
	case volumeReleased:
		if volume.Status.Phase != corev1.VolumeReleased && volume.Status.Phase != corev1.VolumeFailed {
			if volume, err = c.setVolumePhase(ctx, volume, corev1.VolumeReleased, ""); err != nil {
				return err
			}
			c.log.InfoContext(ctx, "volume released", "volume", volume.Name, "reclaimPolicy", volume.Spec.PersistentVolumeReclaimPolicy)
		}
		if volume.Status.Phase == corev1.VolumeFailed {
			return nil
		}
		r := decideReclaim(volume)
		if r.fail {
			c.recorder.Event(volume, corev1.EventTypeWarning, r.reason, r.message)
			_, err = c.setVolumePhase(ctx, volume, corev1.VolumeFailed, r.message)
		}
		return err
	case volumeUnbind:
		out := volume.DeepCopy()
		if metav1.HasAnnotation(volume.ObjectMeta, storagehelpers.AnnBoundByController) {
			out.Spec.ClaimRef = nil
			delete(out.Annotations, storagehelpers.AnnBoundByController)
		} else {
			out.Spec.ClaimRef.UID = "" // pre-bound by a user: keep the name
		}
		if volume, err = c.client.CoreV1().PersistentVolumes().Update(ctx, out, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("unbind volume %s: %w", name, err)
		}
		_, err = c.setVolumePhase(ctx, volume, corev1.VolumeAvailable, "")
		return err
	}
	return nil
}

// claimOf returns the claim the volume's claimRef names, nil when it does not
// exist. A miss in the cache is checked against the API server before the volume
// is released, as the cache may not have seen a new claim yet.
func (c *Controller) claimOf(ctx context.Context, volume *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
	ref := volume.Spec.ClaimRef
	if ref == nil || ref.UID == "" {
		return nil, nil
	}
	claim, err := c.claims.PersistentVolumeClaims(ref.Namespace).Get(ref.Name)
	if apierrors.IsNotFound(err) {
		claim, err = c.client.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if claim.UID != ref.UID {
		return nil, nil // a new claim with the old one's name
	}
	return claim, nil
}
