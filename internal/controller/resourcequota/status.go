package resourcequota

import (
	corev1 "k8s.io/api/core/v1"
	quota "k8s.io/apiserver/pkg/quota/v1"
)

// desiredStatus is the status rq should have given the usage observed now: hard from
// spec.hard, used from observed where measured and from the old status where not
// (a resource no evaluator could measure keeps what admission counted), both limited
// to the resources of spec.hard. dirty says whether it differs from rq's status.
func desiredStatus(rq *corev1.ResourceQuota, observed corev1.ResourceList) (status corev1.ResourceQuotaStatus, dirty bool) {
	hard := quota.Add(corev1.ResourceList{}, rq.Spec.Hard)
	used := quota.Add(corev1.ResourceList{}, rq.Status.Used)
	for name, q := range observed {
		used[name] = q.DeepCopy()
	}
	used = quota.Mask(used, quota.ResourceNames(hard))
	dirty = !quota.Equals(hard, rq.Status.Hard) || !quota.Equals(used, rq.Status.Used) ||
		(len(hard) > 0 && rq.Status.Used == nil)
	return corev1.ResourceQuotaStatus{Hard: hard, Used: used}, dirty
}

// needsSync says whether a quota's status is behind its spec: hard differs, or a hard
// resource has no usage yet (a new quota, or one given a new resource).
func needsSync(rq *corev1.ResourceQuota) bool {
	if !quota.Equals(rq.Spec.Hard, rq.Status.Hard) {
		return true
	}
	for name := range rq.Spec.Hard {
		if _, ok := rq.Status.Used[name]; !ok {
			return true
		}
	}
	return false
}

// gaveBack says whether used is below old for some resource both list: a recount
// gave usage back. Objects admitted (and charged) just before the recount may not have
// reached the controller's caches yet, so a recount that gives usage back is made
// again shortly, once they have.
func gaveBack(old, used corev1.ResourceList) bool {
	for name, q := range used {
		if o, ok := old[name]; ok && q.Cmp(o) < 0 {
			return true
		}
	}
	return false
}
