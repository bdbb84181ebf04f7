package deployment

import (
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// fenceposts resolves maxSurge (rounded up) and maxUnavailable (rounded down) against
// replicas; when both are zero, maxUnavailable is 1 so that a rollout can move.
func fenceposts(maxSurge, maxUnavailable *intstr.IntOrString, replicas int32) (surge, unavailable int32, err error) {
	zero := intstr.FromInt32(0)
	if maxSurge == nil {
		maxSurge = &zero
	}
	if maxUnavailable == nil {
		maxUnavailable = &zero
	}
	s, err := intstr.GetScaledValueFromIntOrPercent(maxSurge, int(replicas), true)
	if err != nil {
		return 0, 0, fmt.Errorf("maxSurge: %w", err)
	}
	u, err := intstr.GetScaledValueFromIntOrPercent(maxUnavailable, int(replicas), false)
	if err != nil {
		return 0, 0, fmt.Errorf("maxUnavailable: %w", err)
	}
	if s == 0 && u == 0 {
		u = 1
	}
	return int32(s), int32(u), nil
}

// maxSurgeOf and maxUnavailableOf are the Deployment's resolved bounds (0 for Recreate).
func maxSurgeOf(d *appsv1.Deployment) int32 {
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || d.Spec.Strategy.RollingUpdate == nil {
		return 0
	}
	s, _, _ := fenceposts(d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable, replicasOf(d))
	return s
}

func maxUnavailableOf(d *appsv1.Deployment) int32 {
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || d.Spec.Strategy.RollingUpdate == nil || replicasOf(d) == 0 {
		return 0
	}
	_, u, _ := fenceposts(d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable, replicasOf(d))
	return min(u, replicasOf(d))
}

func replicasOf(d *appsv1.Deployment) int32 { return ptr.Deref(d.Spec.Replicas, 1) }

func specReplicas(rs *appsv1.ReplicaSet) int32 { return ptr.Deref(rs.Spec.Replicas, 1) }

// available is what rs can be trusted to have available: never more than it is meant
// to keep (pods above spec.replicas are on their way out).
func available(rs *appsv1.ReplicaSet) int32 {
	return min(rs.Status.AvailableReplicas, specReplicas(rs))
}

func sumSpec(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += specReplicas(rs)
		}
	}
	return n
}

// newRSReplicas is how many replicas the new ReplicaSet should have now: for a rolling
// update, as many more as maxSurge allows above the Deployment's replicas (counting
// every ReplicaSet's spec), never more than the Deployment's replicas.
func newRSReplicas(replicas, maxSurge int32, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) int32 {
	cur := int32(0)
	if newRS != nil {
		cur = specReplicas(newRS)
	}
	if cur >= replicas {
		return replicas
	}
	total := sumSpec(all)
	maxTotal := replicas + maxSurge
	if total >= maxTotal {
		return cur
	}
	return cur + min(maxTotal-total, replicas-cur)
}

// oldScaleDown plans the rolling update's scale-down of the old ReplicaSets (oldest
// first): first the replicas that are not available anyway, then available ones, never
// taking the available pods of all ReplicaSets below replicas-maxUnavailable. It returns
// the new size of each old ReplicaSet it changes, by name.
func oldScaleDown(replicas, maxUnavailable int32, newRS *appsv1.ReplicaSet, olds []*appsv1.ReplicaSet) map[string]int32 {
	out := map[string]int32{}
	oldTotal := sumSpec(olds)
	if oldTotal == 0 {
		return out
	}
	sorted := append([]*appsv1.ReplicaSet(nil), olds...)
	sort.SliceStable(sorted, func(i, j int) bool { return olderThan(sorted[i], sorted[j]) })
	size := map[string]int32{}
	for _, rs := range sorted {
		size[rs.Name] = specReplicas(rs)
	}
	minAvailable := replicas - maxUnavailable
	var newSpec, newAvail int32
	if newRS != nil {
		newSpec, newAvail = specReplicas(newRS), available(newRS)
	}
	maxScaledDown := oldTotal + newSpec - minAvailable - (newSpec - newAvail)
	if maxScaledDown <= 0 {
		return out
	}
	// Unhealthy replicas first: removing them costs no availability.
	var cleaned int32
	for _, rs := range sorted {
		if cleaned >= maxScaledDown {
			break
		}
		unhealthy := size[rs.Name] - available(rs)
		if size[rs.Name] == 0 || unhealthy <= 0 {
			continue
		}
		down := min(maxScaledDown-cleaned, unhealthy)
		size[rs.Name] -= down
		out[rs.Name] = size[rs.Name]
		cleaned += down
	}
	// Then available ones, down to minAvailable across every ReplicaSet.
	avail := newAvail
	for _, rs := range sorted {
		avail += min(available(rs), size[rs.Name])
	}
	if avail <= minAvailable {
		return out
	}
	budget := avail - minAvailable
	for _, rs := range sorted {
		if budget <= 0 {
			break
		}
		if size[rs.Name] == 0 {
			continue
		}
		down := min(size[rs.Name], budget)
		size[rs.Name] -= down
		out[rs.Name] = size[rs.Name]
		budget -= down
	}
	return out
}

func olderThan(a, b *appsv1.ReplicaSet) bool {
	if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.Name < b.Name
	}
	return a.CreationTimestamp.Before(&b.CreationTimestamp)
}

// proportionalScale spreads a change of the Deployment's replicas over its active
// ReplicaSets in proportion to their sizes, as upstream does when a Deployment is
// scaled in the middle of a rollout. max is the Deployment's replicas plus maxSurge;
// each ReplicaSet's max-replicas annotation says the max it was sized for. It returns
// the new size of each ReplicaSet by name.
func proportionalScale(maxTotal int32, active []*appsv1.ReplicaSet, annotatedMax func(*appsv1.ReplicaSet) (int32, bool)) map[string]int32 {
	out := map[string]int32{}
	current := sumSpec(active)
	toAdd := maxTotal - current
	if toAdd == 0 || len(active) == 0 {
		return out
	}
	sorted := append([]*appsv1.ReplicaSet(nil), active...)
	// Larger ReplicaSets first (newer first among equals) when growing, the other way
	// round when shrinking, so the leftover lands on the right one.
	sort.SliceStable(sorted, func(i, j int) bool {
		si, sj := specReplicas(sorted[i]), specReplicas(sorted[j])
		if si != sj {
			if toAdd > 0 {
				return si > sj
			}
			return si < sj
		}
		return olderThan(sorted[j], sorted[i])
	})
	var added int32
	for _, rs := range sorted {
		size := specReplicas(rs)
		var share int32
		if m, ok := annotatedMax(rs); ok && m > 0 {
			share = int32(float64(size)*float64(maxTotal)/float64(m)+0.5) - size
		} else if current > 0 {
			share = int32(float64(size)*float64(toAdd)/float64(current) + 0.5)
		}
		remaining := toAdd - added
		if toAdd > 0 {
			share = max(0, min(share, remaining))
		} else {
			share = min(0, max(share, remaining))
		}
		added += share
		out[rs.Name] = size + share
	}
	if added != toAdd {
		first := sorted[0].Name
		out[first] = max(0, out[first]+toAdd-added)
	}
	return out
}
