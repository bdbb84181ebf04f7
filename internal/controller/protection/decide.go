package protection

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
)

// step is what a protection controller does with an object.
type step int

const (
	stepNothing step = iota
	stepAddFinalizer
	// stepCheckRemove: the object is being deleted and holds the finalizer; it goes
	// if the object is not in use.
	stepCheckRemove
)

func hasFinalizer(list []string, f string) bool {
	for _, x := range list {
		if x == f {
			return true
		}
	}
	return false
}

// decide says what to do with an object with these finalizers and deletion state.
func decide(finalizers []string, deleting bool, finalizer string) step {
	has := hasFinalizer(finalizers, finalizer)
	switch {
	case !deleting && !has:
		return stepAddFinalizer
	case deleting && has:
		return stepCheckRemove
	}
	return stepNothing
}

// podUsesClaim says whether pod keeps claim name in use: it is scheduled and names
// the claim (a generic ephemeral volume only until the pod is shut down).
func podUsesClaim(pod *corev1.Pod, claim string) bool {
	if pod.Spec.NodeName == "" {
		return false
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
			return true
		}
		if v.Ephemeral != nil && pod.Name+"-"+v.Name == claim && !podShutDown(pod) {
			return true
		}
	}
	return false
}

// podShutDown: the kubelet is done with the pod, or it was force-deleted.
func podShutDown(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil && *pod.DeletionGracePeriodSeconds == 0
}

// volumeInUse: a Bound volume is in use.
func volumeInUse(pv *corev1.PersistentVolume) bool {
	return pv.Status.Phase == corev1.VolumeBound
}

// addFinalizerPatch adds f with a strategic merge patch (finalizers merge as a
// set), so that it does not conflict with other writers of the object.
func addFinalizerPatch(f string) []byte {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": []string{f}}})
	return b
}

// removeFinalizerPatch removes f with a strategic merge patch.
func removeFinalizerPatch(f string) []byte {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"$deleteFromPrimitiveList/finalizers": []string{f}}})
	return b
}
