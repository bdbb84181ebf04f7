package disruption

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	pdbhelper "k8s.io/component-helpers/apps/poddisruptionbudget"
	"k8s.io/kubectl/pkg/util/podutils"
)

// DeletionTimeout is how long a pod the eviction subresource recorded in
// status.disruptedPods is counted as gone while it is not yet marked for deletion; after
// it the entry is dropped (the eviction did not happen), as upstream.
const DeletionTimeout = 2 * time.Minute

// StalePodDisruptionTimeout is how long a pod not being deleted may keep a True
// DisruptionTarget condition before the controller sets it to False, as upstream.
const StalePodDisruptionTimeout = 2 * time.Minute

// scale is a controller of pods and its spec.replicas.
type scale struct {
	uid      types.UID
	replicas int32
}

// scaleFinder returns the controller ref names in namespace and its scale; nil when
// ref is none of the controllers it knows.
type scaleFinder func(ref *metav1.OwnerReference, namespace string) (*scale, error)

// expectedPods is what the budget's pods should be: how many pods are expected
// (status.expectedPods), how many must be healthy (status.desiredHealthy), and the
// names of the pods without a controller, which a scaled budget cannot count.
//
// An integer minAvailable expects the matching pods themselves; maxUnavailable and a
// percentage minAvailable expect the sum of the scales of the pods' controllers, with
// percentages rounded up. A pod whose controller find does not know is an error.
func expectedPods(pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod, find scaleFinder) (expected, desired int32, unmanaged []string, err error) {
	switch {
	case pdb.Spec.MaxUnavailable != nil:
		expected, unmanaged, err = expectedScale(pods, find)
		if err != nil {
			return 0, 0, nil, err
		}
		maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, int(expected), true)
		if err != nil {
			return 0, 0, nil, err
		}
		desired = max(expected-int32(maxUnavailable), 0)
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.Int:
		desired = pdb.Spec.MinAvailable.IntVal
		expected = int32(len(pods))
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.String:
		expected, unmanaged, err = expectedScale(pods, find)
		if err != nil {
			return 0, 0, nil, err
		}
		minAvailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(expected), true)
		if err != nil {
			return 0, 0, nil, err
		}
		desired = int32(minAvailable)
	}
	return expected, desired, unmanaged, nil
}

// expectedScale sums the scales of the pods' controllers, each controller once.
func expectedScale(pods []*corev1.Pod, find scaleFinder) (int32, []string, error) {
	scales := map[types.UID]int32{}
	var unmanaged []string
	for _, pod := range pods {
		ref := metav1.GetControllerOf(pod)
		if ref == nil {
			unmanaged = append(unmanaged, pod.Name)
			continue
		}
		if _, ok := scales[ref.UID]; ok {
			continue
		}
		s, err := find(ref, pod.Namespace)
		if err != nil {
			return 0, nil, err
		}
		if s == nil {
			return 0, nil, fmt.Errorf("found no controllers for pod %q", pod.Name)
		}
		scales[s.uid] = s.replicas
	}
	var sum int32
	for _, n := range scales {
		sum += n
	}
	return sum, unmanaged, nil
}

// liveDisruptions is status.disruptedPods without the entries that are over: pods
// gone or marked for deletion, and pods still not marked DeletionTimeout after their
// eviction (returned as expired). recheck is when the next kept entry expires.
func liveDisruptions(pods []*corev1.Pod, disrupted map[string]metav1.Time, now time.Time) (kept map[string]metav1.Time, expired []*corev1.Pod, recheck *time.Time) {
	kept = map[string]metav1.Time{}
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		at, ok := disrupted[pod.Name]
		if !ok {
			continue
		}
		deadline := at.Add(DeletionTimeout)
		if deadline.Before(now) {
			expired = append(expired, pod)
			continue
		}
		if recheck == nil || deadline.Before(*recheck) {
			recheck = &deadline
		}
		kept[pod.Name] = at
	}
	return kept, expired, recheck
}

// countHealthy counts the pods that are Ready, not being deleted and not about to be
// (in disrupted for less than DeletionTimeout).
func countHealthy(pods []*corev1.Pod, disrupted map[string]metav1.Time, now time.Time) int32 {
	var n int32
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if at, ok := disrupted[pod.Name]; ok && at.Add(DeletionTimeout).After(now) {
			continue
		}
		if podutils.IsPodReady(pod) {
			n++
		}
	}
	return n
}

// computeStatus is pdb with the status of the counts; changed says whether it differs
// from pdb's. disruptionsAllowed is currentHealthy - desiredHealthy, and 0 while no pod
// is expected, so that a budget whose pods appear before its next sync protects them.
func computeStatus(pdb *policyv1.PodDisruptionBudget, current, desired, expected int32, disrupted map[string]metav1.Time) (*policyv1.PodDisruptionBudget, bool) {
	allowed := current - desired
	if expected <= 0 || allowed <= 0 {
		allowed = 0
	}
	st := pdb.Status
	if st.CurrentHealthy == current && st.DesiredHealthy == desired && st.ExpectedPods == expected &&
		st.DisruptionsAllowed == allowed && apiequality.Semantic.DeepEqual(st.DisruptedPods, disrupted) &&
		st.ObservedGeneration == pdb.Generation && pdbhelper.ConditionsAreUpToDate(pdb) {
		return pdb, false
	}
	out := pdb.DeepCopy()
	out.Status = policyv1.PodDisruptionBudgetStatus{
		CurrentHealthy:     current,
		DesiredHealthy:     desired,
		ExpectedPods:       expected,
		DisruptionsAllowed: allowed,
		DisruptedPods:      disrupted,
		ObservedGeneration: pdb.Generation,
		Conditions:         out.Status.Conditions,
	}
	pdbhelper.UpdateDisruptionAllowedCondition(out)
	return out, true
}

// failSafeStatus is pdb allowing no disruption, its DisruptionAllowed condition False
// for reason SyncFailed with err's message: what the controller writes when it cannot
// compute the budget, so that evictions stop rather than go on unchecked.
func failSafeStatus(pdb *policyv1.PodDisruptionBudget, err error) *policyv1.PodDisruptionBudget {
	out := pdb.DeepCopy()
	out.Status.DisruptionsAllowed = 0
	if out.Status.Conditions == nil {
		out.Status.Conditions = []metav1.Condition{}
	}
	apimeta.SetStatusCondition(&out.Status.Conditions, metav1.Condition{
		Type:               policyv1.DisruptionAllowedCondition,
		Status:             metav1.ConditionFalse,
		Reason:             policyv1.SyncFailedReason,
		Message:            err.Error(),
		ObservedGeneration: out.Status.ObservedGeneration,
	})
	return out
}

// staleDisruption says whether pod carries a True DisruptionTarget condition that the
// controller resets once it is StalePodDisruptionTimeout old, and how long until then.
// A condition is never stale on a pod being deleted or finished, nor when the kubelet
// set it.
func staleDisruption(pod *corev1.Pod, now time.Time) (bool, time.Duration) {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false, 0
	}
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.DisruptionTarget {
			continue
		}
		if c.Status != corev1.ConditionTrue || c.Reason == corev1.PodReasonTerminationByKubelet {
			return false, 0
		}
		return true, max(StalePodDisruptionTimeout-now.Sub(c.LastTransitionTime.Time), 0)
	}
	return false, 0
}

// withoutDisruption is pod with its DisruptionTarget condition False, changed at now.
func withoutDisruption(pod *corev1.Pod, now time.Time) *corev1.Pod {
	out := pod.DeepCopy()
	for i, c := range out.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			out.Status.Conditions[i] = corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionFalse,
				LastTransitionTime: metav1.NewTime(now)}
		}
	}
	return out
}
