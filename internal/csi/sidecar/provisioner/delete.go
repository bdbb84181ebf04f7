package provisioner

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	csiclient "github.com/kubelab/kubelab/internal/csi/client"
)

// syncVolume deletes the storage asset of a Released PV under reclaim policy Delete,
// then the PV; it drops the finalizer of PVs under other policies.
func (c *Controller) syncVolume(ctx context.Context, name string) error {
	pv, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	switch decideDelete(pv, c.driver) {
	case deleteDropFinalizer:
		return c.dropFinalizer(ctx, pv)
	case deleteVolume:
	default:
		return nil
	}
	if objs, _ := c.vaIdx.ByIndex(byPV, pv.Name); len(objs) > 0 {
		va := objs[0].(*storagev1.VolumeAttachment)
		return fmt.Errorf("persistentvolume %s is still attached to node %s", pv.Name, va.Spec.NodeName)
	}
	// A PV whose asset this provisioner deleted moments ago is only finished off
	// (the cache may still show it before its finalizer went).
	if _, done := c.deleted.Load(pv.UID); !done {
		callCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		_, err = c.csi.DeleteVolume(callCtx, &csi.DeleteVolumeRequest{VolumeId: pv.Spec.CSI.VolumeHandle})
		cancel()
		if err != nil {
			c.recorder.Eventf(pv, corev1.EventTypeWarning, ReasonVolumeFailedDelete, "%v", err)
			return fmt.Errorf("DeleteVolume %s of %s: %w", pv.Spec.CSI.VolumeHandle, pv.Name, err)
		}
		c.deleted.Store(pv.UID, struct{}{})
		c.log.InfoContext(ctx, "volume deleted", "pv", pv.Name, "volume", pv.Spec.CSI.VolumeHandle)
	}
	if pv.DeletionTimestamp == nil {
		err := c.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pv.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete persistentvolume %s: %w", pv.Name, err)
		}
		pv, err = c.client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return c.dropFinalizer(ctx, pv)
}

// dropFinalizer removes the provisioner's finalizer from pv.
func (c *Controller) dropFinalizer(ctx context.Context, pv *corev1.PersistentVolume) error {
	out := pv.DeepCopy()
	out.Finalizers = out.Finalizers[:0]
	for _, f := range pv.Finalizers {
		if f != FinalizerProvisoner {
			out.Finalizers = append(out.Finalizers, f)
		}
	}
	if len(out.Finalizers) == len(pv.Finalizers) {
		return nil
	}
	// A patch: the provisioner's role allows patch of PersistentVolumes, not update.
	patch, err := csiclient.Patch(pv, out)
	if err != nil {
		return err
	}
	_, err = c.client.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer from persistentvolume %s: %w", pv.Name, err)
	}
	return nil
}
