package deployment

import (
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/rand"
)

// Upstream names of the labels and annotations a Deployment's ReplicaSets carry.
const (
	PodTemplateHashLabel        = appsv1.DefaultDeploymentUniqueLabelKey // "pod-template-hash"
	RevisionAnnotation          = "deployment.kubernetes.io/revision"
	RevisionHistoryAnnotation   = "deployment.kubernetes.io/revision-history"
	DesiredReplicasAnnotation   = "deployment.kubernetes.io/desired-replicas"
	MaxReplicasAnnotation       = "deployment.kubernetes.io/max-replicas"
	lastAppliedConfigAnnotation = "kubectl.kubernetes.io/last-applied-configuration"
)

// templateHash is the pod-template-hash of template for a Deployment whose
// status.collisionCount is collisions: FNV-32a of the template, salted with the count,
// in the consonant-and-digit alphabet of generated names.
func templateHash(template *corev1.PodTemplateSpec, collisions *int32) string {
	h := fnv.New32a()
	b, _ := json.Marshal(template)
	h.Write(b)
	if collisions != nil {
		var c [4]byte
		binary.LittleEndian.PutUint32(c[:], uint32(*collisions))
		h.Write(c[:])
	}
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// equalIgnoreHash says whether two pod templates are the same but for the
// pod-template-hash label.
func equalIgnoreHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, PodTemplateHashLabel)
	delete(b.Labels, PodTemplateHashLabel)
	if len(a.Labels) == 0 {
		a.Labels = nil
	}
	if len(b.Labels) == 0 {
		b.Labels = nil
	}
	return apiequality.Semantic.DeepEqual(a, b)
}

// revisionOf is the revision annotation of an object (0 when absent or malformed).
func revisionOf(annotations map[string]string) int64 {
	v, err := strconv.ParseInt(annotations[RevisionAnnotation], 10, 64)
	if err != nil {
		return 0
	}
	return v
}

func maxRevision(rss []*appsv1.ReplicaSet) int64 {
	var m int64
	for _, rs := range rss {
		m = max(m, revisionOf(rs.Annotations))
	}
	return m
}

// skipCopy lists the Deployment annotations a ReplicaSet does not inherit.
func skipCopy(k string) bool {
	switch k {
	case lastAppliedConfigAnnotation, RevisionAnnotation, RevisionHistoryAnnotation, DesiredReplicasAnnotation, MaxReplicasAnnotation,
		"deprecated.deployment.rollback.to":
		return true
	}
	return false
}

// setNewRSAnnotations copies the Deployment's annotations onto rs and gives it
// revision newRevision, recording its previous revision in revision-history when it
// had one (a rollback to an old template). It says whether rs changed.
func setNewRSAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet, newRevision int64) bool {
	changed := false
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	for k, v := range d.Annotations {
		if skipCopy(k) || rs.Annotations[k] == v {
			continue
		}
		rs.Annotations[k] = v
		changed = true
	}
	old := revisionOf(rs.Annotations)
	if old < newRevision {
		if old > 0 {
			hist := rs.Annotations[RevisionHistoryAnnotation]
			if hist == "" {
				hist = strconv.FormatInt(old, 10)
			} else {
				hist += "," + strconv.FormatInt(old, 10)
			}
			rs.Annotations[RevisionHistoryAnnotation] = hist
		}
		rs.Annotations[RevisionAnnotation] = strconv.FormatInt(newRevision, 10)
		changed = true
	}
	return changed
}

// setReplicasAnnotations records the Deployment size rs was scaled for.
func setReplicasAnnotations(rs *appsv1.ReplicaSet, desired, maxTotal int32) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	d, m := strconv.Itoa(int(desired)), strconv.Itoa(int(maxTotal))
	if rs.Annotations[DesiredReplicasAnnotation] == d && rs.Annotations[MaxReplicasAnnotation] == m {
		return false
	}
	rs.Annotations[DesiredReplicasAnnotation], rs.Annotations[MaxReplicasAnnotation] = d, m
	return true
}

func annotatedInt(rs *appsv1.ReplicaSet, key string) (int32, bool) {
	v, err := strconv.ParseInt(rs.Annotations[key], 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(v), true
}

// historyToDelete picks the old ReplicaSets to delete so that at most limit remain:
// only empty ones, whose status is current, oldest revision first.
func historyToDelete(olds []*appsv1.ReplicaSet, limit int32) []*appsv1.ReplicaSet {
	var empty []*appsv1.ReplicaSet
	for _, rs := range olds {
		if specReplicas(rs) == 0 && rs.Status.Replicas == 0 && rs.Generation <= rs.Status.ObservedGeneration && rs.DeletionTimestamp == nil {
			empty = append(empty, rs)
		}
	}
	excess := len(olds) - int(limit)
	if excess <= 0 {
		return nil
	}
	sort.SliceStable(empty, func(i, j int) bool {
		ri, rj := revisionOf(empty[i].Annotations), revisionOf(empty[j].Annotations)
		if ri != rj {
			return ri < rj
		}
		return olderThan(empty[i], empty[j])
	})
	return empty[:min(excess, len(empty))]
}
