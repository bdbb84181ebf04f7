package resizer

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Event reasons and condition messages, as upstream.
const (
	ReasonResizing                 = "Resizing"
	ReasonFileSystemResizeRequired = "FileSystemResizeRequired"
	ReasonVolumeResizeSuccessful   = "VolumeResizeSuccessful"
	ReasonVolumeResizeFailed       = "VolumeResizeFailed"
	// ConditionControllerResizeError marks a resize the driver refused.
	ConditionControllerResizeError corev1.PersistentVolumeClaimConditionType = "ControllerResizeError"
	messageFSResizePending                                                   = "Waiting for user to (re-)start a pod to finish file system resize of volume on node."
)

// decideResize says whether the claim's volume must grow: the claim is Bound to pv
// of this driver and asks for more than pv has, and the same request was not
// already refused as infeasible.
func decideResize(pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, driver string) bool {
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName != pv.Name || pv.Spec.CSI == nil || pv.Spec.CSI.Driver != driver {
		return false
	}
	want, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return false
	}
	have := pv.Spec.Capacity[corev1.ResourceStorage]
	if want.Cmp(have) <= 0 {
		return false
	}
	if pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimControllerResizeInfeasible {
		if alloc, ok := pvc.Status.AllocatedResources[corev1.ResourceStorage]; ok && alloc.Cmp(want) == 0 {
			return false
		}
	}
	return true
}

// setCondition returns conds with c replacing any condition of its type.
func setCondition(conds []corev1.PersistentVolumeClaimCondition, c corev1.PersistentVolumeClaimCondition) []corev1.PersistentVolumeClaimCondition {
	out := dropConditions(conds, c.Type)
	return append(out, c)
}

func dropConditions(conds []corev1.PersistentVolumeClaimCondition, types ...corev1.PersistentVolumeClaimConditionType) []corev1.PersistentVolumeClaimCondition {
	var out []corev1.PersistentVolumeClaimCondition
	for _, c := range conds {
		drop := false
		for _, t := range types {
			if c.Type == t {
				drop = true
			}
		}
		if !drop {
			out = append(out, c)
		}
	}
	return out
}

func setAllocated(pvc *corev1.PersistentVolumeClaim, size resource.Quantity, st corev1.ClaimResourceStatus) {
	if pvc.Status.AllocatedResources == nil {
		pvc.Status.AllocatedResources = corev1.ResourceList{}
	}
	pvc.Status.AllocatedResources[corev1.ResourceStorage] = size
	if pvc.Status.AllocatedResourceStatuses == nil {
		pvc.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{}
	}
	pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] = st
}

// resizingStatus is the claim's status while the controller resize runs.
func resizingStatus(pvc *corev1.PersistentVolumeClaim, want resource.Quantity, now time.Time) *corev1.PersistentVolumeClaim {
	out := pvc.DeepCopy()
	out.Status.Conditions = dropConditions(out.Status.Conditions, ConditionControllerResizeError)
	out.Status.Conditions = setCondition(out.Status.Conditions, corev1.PersistentVolumeClaimCondition{
		Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now)})
	setAllocated(out, want, corev1.PersistentVolumeClaimControllerResizeInProgress)
	return out
}

// resizedStatus is the claim's status once the volume has size: waiting for the
// node when it must grow the filesystem, else done.
func resizedStatus(pvc *corev1.PersistentVolumeClaim, size resource.Quantity, nodeExpansion bool, now time.Time) *corev1.PersistentVolumeClaim {
	out := pvc.DeepCopy()
	out.Status.Conditions = dropConditions(out.Status.Conditions, corev1.PersistentVolumeClaimResizing, ConditionControllerResizeError)
	if nodeExpansion {
		out.Status.Conditions = setCondition(out.Status.Conditions, corev1.PersistentVolumeClaimCondition{
			Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now), Message: messageFSResizePending})
		setAllocated(out, size, corev1.PersistentVolumeClaimNodeResizePending)
		return out
	}
	out.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: size}
	delete(out.Status.AllocatedResourceStatuses, corev1.ResourceStorage)
	if len(out.Status.AllocatedResourceStatuses) == 0 {
		out.Status.AllocatedResourceStatuses = nil
	}
	return out
}

// failedStatus is the claim's status after a refused (final) or failed resize.
func failedStatus(pvc *corev1.PersistentVolumeClaim, want resource.Quantity, final bool, message string, now time.Time) *corev1.PersistentVolumeClaim {
	out := pvc.DeepCopy()
	if !final {
		setAllocated(out, want, corev1.PersistentVolumeClaimControllerResizeInProgress)
		return out
	}
	out.Status.Conditions = dropConditions(out.Status.Conditions, corev1.PersistentVolumeClaimResizing)
	out.Status.Conditions = setCondition(out.Status.Conditions, corev1.PersistentVolumeClaimCondition{
		Type: ConditionControllerResizeError, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now), Message: message})
	setAllocated(out, want, corev1.PersistentVolumeClaimControllerResizeInfeasible)
	return out
}
