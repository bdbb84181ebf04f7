package statefulset

import (
	"fmt"
	"regexp"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Upstream label names.
const (
	PodNameLabel      = appsv1.StatefulSetPodNameLabel // statefulset.kubernetes.io/pod-name
	PodIndexLabel     = appsv1.PodIndexLabel           // apps.kubernetes.io/pod-index
	RevisionHashLabel = appsv1.ControllerRevisionHashLabelKey
)

var ordinalRE = regexp.MustCompile(`^(.*)-(\d+)$`)

// ordinalOf parses "<set>-<i>"; ok is false for other names.
func ordinalOf(set, pod string) (int, bool) {
	m := ordinalRE.FindStringSubmatch(pod)
	if m == nil || m[1] != set {
		return 0, false
	}
	i, err := strconv.Atoi(m[2])
	return i, err == nil
}

func podName(set *appsv1.StatefulSet, ord int) string { return fmt.Sprintf("%s-%d", set.Name, ord) }

func claimName(tmpl string, set *appsv1.StatefulSet, ord int) string {
	return fmt.Sprintf("%s-%s-%d", tmpl, set.Name, ord)
}

func startOrdinal(set *appsv1.StatefulSet) int {
	if set.Spec.Ordinals != nil {
		return int(set.Spec.Ordinals.Start)
	}
	return 0
}

// podState is what the plan needs to know of a pod.
type podState struct {
	exists, terminating, failed, runningReady bool
	revision                                  string
}

// step is the one thing the controller does next.
type step struct {
	create []int // ordinals to create
	delete []int // ordinals to delete
}

// plan decides, from the state of each ordinal, which pods to create or delete now.
// replicas is [start, end); parallel is the Parallel pod management policy; update is
// the revision pods should have for ordinals at or above start+partition (nil: OnDelete).
func plan(start, end int, pods map[int]podState, parallel bool, update *string, partition int) step {
	var s step
	allHealthy := true
	// Bring up the replicas, lowest first.
	for ord := start; ord < end; ord++ {
		p := pods[ord]
		switch {
		case !p.exists:
			s.create = append(s.create, ord)
			allHealthy = false
		case p.failed && !p.terminating:
			s.delete = append(s.delete, ord) // comes back on a later pass
			allHealthy = false
		case p.terminating || !p.runningReady:
			allHealthy = false
		default:
			continue
		}
		if !parallel {
			return s
		}
	}
	// Condemned ordinals, highest first.
	var condemned []int
	for ord := range pods {
		if ord < start || ord >= end {
			condemned = append(condemned, ord)
		}
	}
	sortDesc(condemned)
	for _, ord := range condemned {
		p := pods[ord]
		if p.terminating {
			if !parallel {
				return s
			}
			continue
		}
		if !parallel && !allHealthy {
			return s
		}
		if !parallel {
			// Every ordinal below must be running and ready.
			for _, o := range condemned {
				if o < ord && (pods[o].terminating || !pods[o].runningReady) {
					return s
				}
			}
			s.delete = append(s.delete, ord)
			return s
		}
		s.delete = append(s.delete, ord)
	}
	if len(s.create) > 0 || len(s.delete) > 0 || update == nil || !allHealthy || len(condemned) > 0 {
		return s
	}
	// Rolling update, highest ordinal first, one at a time.
	for ord := end - 1; ord >= start+partition; ord-- {
		p := pods[ord]
		if p.revision != *update {
			s.delete = append(s.delete, ord)
			return s
		}
	}
	return s
}

func sortDesc(a []int) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] > a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// newPod is pod ord of set at revision rev.
func newPod(set *appsv1.StatefulSet, ord int, rev string) *corev1.Pod {
	t := set.Spec.Template.DeepCopy()
	name := podName(set, ord)
	p := &corev1.Pod{ObjectMeta: t.ObjectMeta, Spec: t.Spec}
	p.Name, p.Namespace, p.GenerateName = name, set.Namespace, ""
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[PodNameLabel] = name
	p.Labels[PodIndexLabel] = strconv.Itoa(ord)
	p.Labels[RevisionHashLabel] = rev
	p.OwnerReferences = []metav1OwnerRef{controllerRef(set)}
	p.Spec.Hostname = name
	p.Spec.Subdomain = set.Spec.ServiceName
	for _, ct := range set.Spec.VolumeClaimTemplates {
		v := corev1.Volume{Name: ct.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName(ct.Name, set, ord)}}}
		replaced := false
		for i := range p.Spec.Volumes {
			if p.Spec.Volumes[i].Name == ct.Name {
				p.Spec.Volumes[i], replaced = v, true
			}
		}
		if !replaced {
			p.Spec.Volumes = append(p.Spec.Volumes, v)
		}
	}
	return p
}

// newClaims are the PVCs of pod ord.
func newClaims(set *appsv1.StatefulSet, ord int) []*corev1.PersistentVolumeClaim {
	var out []*corev1.PersistentVolumeClaim
	for _, ct := range set.Spec.VolumeClaimTemplates {
		c := ct.DeepCopy()
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: c.ObjectMeta, Spec: c.Spec}
		pvc.Name, pvc.Namespace = claimName(ct.Name, set, ord), set.Namespace
		pvc.ResourceVersion, pvc.UID = "", ""
		if pvc.Labels == nil {
			pvc.Labels = map[string]string{}
		}
		if set.Spec.Selector != nil {
			for k, v := range set.Spec.Selector.MatchLabels {
				pvc.Labels[k] = v
			}
		}
		if p := set.Spec.PersistentVolumeClaimRetentionPolicy; p != nil && p.WhenDeleted == appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
			ref := controllerRef(set)
			ref.Controller = nil
			pvc.OwnerReferences = []metav1OwnerRef{ref}
		}
		out = append(out, pvc)
	}
	return out
}

func replicas(set *appsv1.StatefulSet) int { return int(ptr.Deref(set.Spec.Replicas, 1)) }
