package nodelifecycle

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// ourTaints are the taints this controller owns.
var ourTaints = []corev1.Taint{
	{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule},
}

// wantedTaints are the taints a node with Ready condition ready should carry, with
// node.kubernetes.io/unschedulable:NoSchedule added when it is cordoned
// (spec.unschedulable).
func wantedTaints(ready *corev1.NodeCondition, unschedulable bool) []corev1.Taint {
	var out []corev1.Taint
	key := ""
	switch {
	case ready == nil || ready.Status == corev1.ConditionUnknown:
		key = corev1.TaintNodeUnreachable
	case ready.Status == corev1.ConditionFalse:
		key = corev1.TaintNodeNotReady
	}
	if key != "" {
		out = append(out, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule}, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoExecute})
	}
	if unschedulable {
		out = append(out, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
	}
	return out
}

// taintInputsChanged says whether a node update may change the taints it should carry:
// its cordon, its Ready status or its taints changed.
func taintInputsChanged(old, cur *corev1.Node) bool {
	status := func(n *corev1.Node) corev1.ConditionStatus {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status
			}
		}
		return ""
	}
	if old.Spec.Unschedulable != cur.Spec.Unschedulable || status(old) != status(cur) || len(old.Spec.Taints) != len(cur.Spec.Taints) {
		return true
	}
	for i := range old.Spec.Taints {
		if !old.Spec.Taints[i].MatchTaint(&cur.Spec.Taints[i]) {
			return true
		}
	}
	return false
}

func ours(t corev1.Taint) bool {
	for _, o := range ourTaints {
		if o.Key == t.Key && o.Effect == t.Effect {
			return true
		}
	}
	return false
}

// reconcileTaints returns current with our taints replaced by want (NoExecute ones
// stamped with now when added), and whether anything changed.
func reconcileTaints(current, want []corev1.Taint, now time.Time) ([]corev1.Taint, bool) {
	var out []corev1.Taint
	changed := false
	has := func(list []corev1.Taint, t corev1.Taint) bool {
		for _, x := range list {
			if x.Key == t.Key && x.Effect == t.Effect {
				return true
			}
		}
		return false
	}
	for _, t := range current {
		if ours(t) && !has(want, t) {
			changed = true
			continue
		}
		out = append(out, t)
	}
	for _, t := range want {
		if has(current, t) {
			continue
		}
		if t.Effect == corev1.TaintEffectNoExecute {
			ts := metav1.NewTime(now)
			t.TimeAdded = &ts
		}
		out = append(out, t)
		changed = true
	}
	return out, changed
}

// evictionTime says when pod must leave a node with these taints: evict is false when
// its tolerations keep it there for good.
func evictionTime(pod *corev1.Pod, taints []corev1.Taint, defaultSeconds int64, now time.Time) (at time.Time, evict bool) {
	for i := range taints {
		t := &taints[i]
		if t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		added := now
		if t.TimeAdded != nil {
			added = t.TimeAdded.Time
		}
		var seconds *int64
		tolerated := false
		for j := range pod.Spec.Tolerations {
			tol := &pod.Spec.Tolerations[j]
			if !tol.ToleratesTaint(klog.Background(), t, false) {
				continue
			}
			// The shortest window wins; nil (forever) only if every match is nil.
			switch {
			case !tolerated:
				seconds = tol.TolerationSeconds
			case tol.TolerationSeconds != nil && (seconds == nil || *tol.TolerationSeconds < *seconds):
				seconds = tol.TolerationSeconds
			}
			tolerated = true
		}
		if !tolerated && (t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable) {
			// The default toleration every pod would have got at admission.
			tolerated, seconds = true, &defaultSeconds
		}
		var deadline time.Time
		switch {
		case !tolerated:
			deadline = added
		case seconds == nil:
			continue
		default:
			deadline = added.Add(time.Duration(max(*seconds, 0)) * time.Second)
		}
		if !evict || deadline.Before(at) {
			at, evict = deadline, true
		}
	}
	return at, evict
}
