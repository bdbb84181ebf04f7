package kubelet

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// Online expansion (a CSI volume grown while a pod uses it): the external-resizer
// grows the cloud volume and the PV, and when the driver says the filesystem must follow
// it marks the claim FileSystemResizePending (status.allocatedResourceStatuses storage:
// NodeResizePending). The kubelet of a node that has the volume published calls
// NodeExpandVolume, then records the new size in the claim's status.capacity and clears
// the resize condition and status, and tells the pod and the claim
// (FileSystemResizeSuccessful).

// ReasonFileSystemResizeSuccessful is the event of a finished node expansion, and
// ReasonVolumeResizeFailed the pod's warning when NodeExpandVolume failed (the claim
// stays FileSystemResizePending; a volume the node cannot grow while it is mounted grows
// at its next NodeStageVolume, when its pods are started again).
const (
	ReasonFileSystemResizeSuccessful = "FileSystemResizeSuccessful"
	ReasonVolumeResizeFailed         = "VolumeResizeFailed"
)

// nodeExpansion says whether claim's filesystem waits for the node to grow it, and to
// what size: the claim asks for it (resizePending) and its PV is larger than the claim's
// capacity.
func nodeExpansion(pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) (resource.Quantity, bool) {
	size, have := pv.Spec.Capacity[corev1.ResourceStorage], pvc.Status.Capacity[corev1.ResourceStorage]
	if !resizePending(pvc) || size.Cmp(have) <= 0 {
		return resource.Quantity{}, false
	}
	return size, true
}

// resizePending says whether the claim asks the node to grow its filesystem: the
// FileSystemResizePending condition, or NodeResizePending for storage.
func resizePending(pvc *corev1.PersistentVolumeClaim) bool {
	if pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimNodeResizePending {
		return true
	}
	for _, c := range pvc.Status.Conditions {
		if c.Type == corev1.PersistentVolumeClaimFileSystemResizePending && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// resizeFinished is the status patch of a claim whose filesystem now has size: the
// capacity, and the conditions and storage resize status of the resize gone. It carries
// the claim's resourceVersion, so that it applies to the claim it was computed from.
func resizeFinished(pvc *corev1.PersistentVolumeClaim, size resource.Quantity) ([]byte, error) {
	conditions := []corev1.PersistentVolumeClaimCondition{}
	for _, c := range pvc.Status.Conditions {
		if c.Type != corev1.PersistentVolumeClaimFileSystemResizePending && c.Type != corev1.PersistentVolumeClaimResizing {
			conditions = append(conditions, c)
		}
	}
	capacity := corev1.ResourceList{}
	for k, v := range pvc.Status.Capacity {
		capacity[k] = v
	}
	capacity[corev1.ResourceStorage] = size
	statuses := map[corev1.ResourceName]any{corev1.ResourceStorage: nil}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": pvc.ResourceVersion},
		"status":   map[string]any{"capacity": capacity, "conditions": conditions, "allocatedResourceStatuses": statuses},
	})
}

// expandedVolume is a volume the node just grew, with its claim for the events.
type expandedVolume struct {
	volume *Volume
	claim  *corev1.PersistentVolumeClaim
}

// expandInUse grows the filesystems of pod's published volumes whose claims wait for it.
func (m *volumeManager) expandInUse(ctx context.Context, pod *corev1.Pod) ([]expandedVolume, error) {
	m.mu.Lock()
	vols := m.mounted[pod.UID]
	m.mu.Unlock()
	var out []expandedVolume
	for _, v := range vols {
		ns, name, _ := cache.SplitMetaNamespaceKey(v.Claim)
		pvc, err := m.claim(ctx, ns, name)
		if err != nil {
			continue // the pod's sync meets a missing claim itself
		}
		if !resizePending(pvc) {
			continue
		}
		pv, err := m.volume(ctx, v.PVName)
		if err != nil {
			continue
		}
		size, ok := nodeExpansion(pvc, pv)
		if !ok {
			continue
		}
		if err := m.mounter.Expand(ctx, v, stagingPath(m.root, v.PVName), targetPath(m.root, pod.UID, v.PVName), size); err != nil {
			return out, fmt.Errorf("expand %s to %s: %w", v.PVName, size.String(), err)
		}
		patch, err := resizeFinished(pvc, size)
		if err != nil {
			return out, err
		}
		updated, err := m.client.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
		if apierrors.IsConflict(err) {
			continue // the claim changed since it was read; checkExpansions brings the pod back if still due
		}
		if err != nil {
			return out, fmt.Errorf("record the new size of claim %s: %w", v.Claim, err)
		}
		out = append(out, expandedVolume{volume: v, claim: updated})
	}
	return out, nil
}

// checkExpansions requeues the pods that have a claim published whose filesystem waits
// for the node to grow it. A kubelet cannot watch claims (it may only get those of its
// pods): Kubelet.Run calls this every second.
func (m *volumeManager) checkExpansions(ctx context.Context) {
	keys, volumes := map[string][]string{}, map[string]string{} // by claim: pod keys, PV
	m.mu.Lock()
	for uid, vols := range m.mounted {
		for _, v := range vols {
			keys[v.Claim] = append(keys[v.Claim], m.podKeys[uid])
			volumes[v.Claim] = v.PVName
		}
	}
	m.mu.Unlock()
	for claim, podKeys := range keys {
		ns, name, _ := cache.SplitMetaNamespaceKey(claim)
		pvc, err := m.claim(ctx, ns, name)
		if err != nil || !resizePending(pvc) {
			continue
		}
		pv, err := m.volume(ctx, volumes[claim])
		if err != nil {
			continue
		}
		if _, ok := nodeExpansion(pvc, pv); ok {
			m.requeue(podKeys...)
		}
	}
}
