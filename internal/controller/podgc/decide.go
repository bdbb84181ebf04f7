package podgc

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// terminated tells whether a pod is in a terminal phase.
func terminated(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// orphans are the pods bound to a node that is not in nodes and has been missing since
// before now−quarantine (missingSince records, per node, when it was first seen missing;
// it is updated: nodes seen again are forgotten).
func orphans(pods []*corev1.Pod, nodes map[string]bool, missingSince map[string]time.Time, now time.Time, quarantine time.Duration) []*corev1.Pod {
	for n := range missingSince {
		if nodes[n] {
			delete(missingSince, n)
		}
	}
	var out []*corev1.Pod
	for _, p := range pods {
		n := p.Spec.NodeName
		if n == "" || nodes[n] {
			continue
		}
		since, ok := missingSince[n]
		if !ok {
			missingSince[n] = now
			continue
		}
		if now.Sub(since) >= quarantine {
			out = append(out, p)
		}
	}
	return out
}

// unscheduledTerminating are the pods being deleted that no node ever ran.
func unscheduledTerminating(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp != nil && p.Spec.NodeName == "" {
			out = append(out, p)
		}
	}
	return out
}

// excessTerminated are the oldest terminated pods beyond threshold (none when threshold
// is not positive).
func excessTerminated(pods []*corev1.Pod, threshold int) []*corev1.Pod {
	if threshold <= 0 {
		return nil
	}
	var done []*corev1.Pod
	for _, p := range pods {
		if terminated(p) && p.DeletionTimestamp == nil {
			done = append(done, p)
		}
	}
	if len(done) <= threshold {
		return nil
	}
	sort.SliceStable(done, func(i, j int) bool {
		return done[i].CreationTimestamp.Before(&done[j].CreationTimestamp)
	})
	return done[:len(done)-threshold]
}
