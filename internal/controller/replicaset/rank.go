package replicaset

import (
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/kubelab/kubelab/internal/util/podutil"
)

// podDeletionCostAnnotation lets users say which pods of a ReplicaSet go first on
// scale-down (lower cost first), as upstream.
const podDeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// podsToDelete picks the n pods to delete on scale-down, least valuable first: pods not
// yet scheduled, then pending, unknown, running; not ready before ready; lower deletion
// cost; doubled up on a node before alone; ready for a shorter time; more restarts;
// newer. It does not change pods.
func podsToDelete(pods []*corev1.Pod, n int) []*corev1.Pod {
	if n <= 0 {
		return nil
	}
	if n > len(pods) {
		n = len(pods)
	}
	perNode := map[string]int{}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			perNode[p.Spec.NodeName]++
		}
	}
	sorted := append([]*corev1.Pod(nil), pods...)
	sort.SliceStable(sorted, func(i, j int) bool { return deleteBefore(sorted[i], sorted[j], perNode) })
	return sorted[:n]
}

// deleteBefore says whether a should be deleted before b.
func deleteBefore(a, b *corev1.Pod, perNode map[string]int) bool {
	if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	if pa, pb := phaseRank(a.Status.Phase), phaseRank(b.Status.Phase); pa != pb {
		return pa < pb
	}
	if ra, rb := podutils.IsPodReady(a), podutils.IsPodReady(b); ra != rb {
		return !ra
	}
	if ca, cb := deletionCost(a), deletionCost(b); ca != cb {
		return ca < cb
	}
	if na, nb := perNode[a.Spec.NodeName], perNode[b.Spec.NodeName]; a.Spec.NodeName != "" && na != nb {
		return na > nb
	}
	if podutils.IsPodReady(a) && podutils.IsPodReady(b) {
		ta, tb := podutil.ReadySince(a), podutil.ReadySince(b)
		if !ta.Equal(tb) {
			return ta.After(tb)
		}
	}
	if ra, rb := restarts(a), restarts(b); ra != rb {
		return ra > rb
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.After(b.CreationTimestamp.Time)
	}
	return a.Name > b.Name
}

func phaseRank(p corev1.PodPhase) int {
	switch p {
	case corev1.PodPending:
		return 0
	case corev1.PodUnknown:
		return 1
	case corev1.PodRunning:
		return 2
	}
	return 0
}

func deletionCost(p *corev1.Pod) int64 {
	v, err := strconv.ParseInt(p.Annotations[podDeletionCostAnnotation], 10, 32)
	if err != nil {
		return 0
	}
	return v
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n = max(n, c.RestartCount)
	}
	return n
}

// podActive says whether the pod counts towards the ReplicaSet's replicas: not being
// deleted and not finished.
func podActive(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}
