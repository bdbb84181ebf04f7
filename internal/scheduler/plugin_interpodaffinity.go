package scheduler

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

const (
	reasonAffinityNotMatch         = "node(s) didn't match pod affinity rules"
	reasonAntiAffinityNotMatch     = "node(s) didn't match pod anti-affinity rules"
	reasonExistingAntiAffinityRule = "node(s) didn't satisfy existing pods anti-affinity rules"
	// hardAffinityWeight is what an existing pod's required affinity term adds to the score
	// of the incoming pod it selects (upstream's default).
	hardAffinityWeight = 1
)

// interPodAffinity enforces required pod affinity and anti-affinity (the pod's own and
// the existing pods' anti-affinity) and scores the preferred terms.
type interPodAffinity struct{}

type topologyPair struct{ key, value string }

type affinityState struct {
	existingAnti map[topologyPair]int
	affinity     map[topologyPair]int
	anti         map[topologyPair]int
	nsLabels     labels.Set
}

func clonePairs(m map[topologyPair]int) map[topologyPair]int {
	c := make(map[topologyPair]int, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func (s *affinityState) Clone() StateData {
	return &affinityState{existingAnti: clonePairs(s.existingAnti), affinity: clonePairs(s.affinity), anti: clonePairs(s.anti), nsLabels: s.nsLabels}
}

func (interPodAffinity) Name() string { return InterPodAffinityName }

func (interPodAffinity) PreFilter(_ context.Context, state *CycleState, pod *PodInfo, snap *Snapshot) *Status {
	if pod.parseErr != nil {
		return NewStatus(UnschedulableAndUnresolvable, "invalid pod affinity: "+pod.parseErr.Error())
	}
	if len(pod.RequiredAffinityTerms) == 0 && len(pod.RequiredAntiAffinityTerms) == 0 && len(snap.NodesWithRequiredAntiAffinityPods) == 0 {
		return NewStatus(Skip)
	}
	s := &affinityState{existingAnti: map[topologyPair]int{}, affinity: map[topologyPair]int{}, anti: map[topologyPair]int{},
		nsLabels: labels.Set(snap.nsLabels(pod.Pod.Namespace))}
	for _, n := range snap.NodesWithRequiredAntiAffinityPods {
		for _, existing := range n.PodsWithRequiredAntiAffinity {
			addExistingAnti(s, pod, existing, n, 1)
		}
	}
	if len(pod.RequiredAffinityTerms) > 0 || len(pod.RequiredAntiAffinityTerms) > 0 {
		for _, n := range snap.Nodes {
			for _, existing := range n.Pods {
				addIncomingCounts(s, pod, existing, n, 1, snap.nsLabels)
			}
		}
	}
	state.Write(InterPodAffinityName, s)
	return nil
}

// addExistingAnti counts the existing pod's anti-affinity terms that select the incoming pod.
func addExistingAnti(s *affinityState, pod, existing *PodInfo, n *NodeInfo, delta int) {
	for i := range existing.RequiredAntiAffinityTerms {
		t := &existing.RequiredAntiAffinityTerms[i]
		if v, ok := n.Node.Labels[t.TopologyKey]; ok && t.matches(pod.Pod, s.nsLabels) {
			s.existingAnti[topologyPair{t.TopologyKey, v}] += delta
		}
	}
}

// addIncomingCounts counts the existing pod against the incoming pod's required terms.
func addIncomingCounts(s *affinityState, pod, existing *PodInfo, n *NodeInfo, delta int, nsLabels func(string) map[string]string) {
	if existing.Pod.DeletionTimestamp != nil {
		return
	}
	exLabels := labels.Set(nsLabels(existing.Pod.Namespace))
	if len(pod.RequiredAffinityTerms) > 0 {
		all := true
		for i := range pod.RequiredAffinityTerms {
			if !pod.RequiredAffinityTerms[i].matches(existing.Pod, exLabels) {
				all = false
				break
			}
		}
		if all {
			for _, t := range pod.RequiredAffinityTerms {
				if v, ok := n.Node.Labels[t.TopologyKey]; ok {
					s.affinity[topologyPair{t.TopologyKey, v}] += delta
				}
			}
		}
	}
	for i := range pod.RequiredAntiAffinityTerms {
		t := &pod.RequiredAntiAffinityTerms[i]
		if v, ok := n.Node.Labels[t.TopologyKey]; ok && t.matches(existing.Pod, exLabels) {
			s.anti[topologyPair{t.TopologyKey, v}] += delta
		}
	}
}

func (interPodAffinity) Filter(_ context.Context, state *CycleState, pod *PodInfo, node *NodeInfo) *Status {
	s, _ := state.Read(InterPodAffinityName).(*affinityState)
	if s == nil {
		return nil
	}
	return affinityFits(s, pod, node.Node)
}

// affinityFits applies the three rules in upstream's order.
func affinityFits(s *affinityState, pod *PodInfo, node *corev1.Node) *Status {
	for pair, n := range s.existingAnti {
		if n > 0 && node.Labels[pair.key] == pair.value {
			if _, ok := node.Labels[pair.key]; ok {
				return NewStatus(Unschedulable, reasonExistingAntiAffinityRule)
			}
		}
	}
	for _, t := range pod.RequiredAntiAffinityTerms {
		if v, ok := node.Labels[t.TopologyKey]; ok && s.anti[topologyPair{t.TopologyKey, v}] > 0 {
			return NewStatus(Unschedulable, reasonAntiAffinityNotMatch)
		}
	}
	if len(pod.RequiredAffinityTerms) == 0 {
		return nil
	}
	all := true
	for _, t := range pod.RequiredAffinityTerms {
		v, ok := node.Labels[t.TopologyKey]
		if !ok || s.affinity[topologyPair{t.TopologyKey, v}] <= 0 {
			all = false
			break
		}
	}
	if all {
		return nil
	}
	// The first pod of a group that selects itself may go anywhere the keys exist.
	if len(s.affinity) == 0 {
		self := true
		for i := range pod.RequiredAffinityTerms {
			t := &pod.RequiredAffinityTerms[i]
			if _, ok := node.Labels[t.TopologyKey]; !ok || !t.matches(pod.Pod, s.nsLabels) {
				self = false
				break
			}
		}
		if self {
			return nil
		}
	}
	return NewStatus(UnschedulableAndUnresolvable, reasonAffinityNotMatch)
}

func (interPodAffinity) AddPod(state *CycleState, pod *PodInfo, add *PodInfo, node *NodeInfo) {
	updateAffinity(state, pod, add, node, 1)
}

func (interPodAffinity) RemovePod(state *CycleState, pod *PodInfo, rm *PodInfo, node *NodeInfo) {
	updateAffinity(state, pod, rm, node, -1)
}

func updateAffinity(state *CycleState, pod *PodInfo, other *PodInfo, node *NodeInfo, delta int) {
	s, _ := state.Read(InterPodAffinityName).(*affinityState)
	if s == nil {
		return
	}
	addExistingAnti(s, pod, other, node, delta)
	addIncomingCounts(s, pod, other, node, delta, func(string) map[string]string { return s.nsLabels })
}

const affinityScoreKey = InterPodAffinityName + "/score"

type affinityScoreState struct{ pairs map[topologyPair]int64 }

func (s *affinityScoreState) Clone() StateData { return s }

func (interPodAffinity) PreScore(_ context.Context, state *CycleState, pod *PodInfo, _ []*NodeInfo, snap *Snapshot) *Status {
	hasPreferred := len(pod.PreferredAffinityTerms)+len(pod.PreferredAntiAffinityTerms) > 0
	if !hasPreferred && len(snap.NodesWithAffinityPods) == 0 {
		return NewStatus(Skip)
	}
	nodes := snap.NodesWithAffinityPods
	if hasPreferred {
		nodes = snap.Nodes
	}
	pairs := map[topologyPair]int64{}
	podNS := labels.Set(snap.nsLabels(pod.Pod.Namespace))
	add := func(t *AffinityTerm, target *corev1.Pod, targetNS labels.Set, n *NodeInfo, w int64) {
		if v, ok := n.Node.Labels[t.TopologyKey]; ok && t.matches(target, targetNS) {
			pairs[topologyPair{t.TopologyKey, v}] += w
		}
	}
	for _, n := range nodes {
		list := n.PodsWithAffinity
		if hasPreferred {
			list = n.Pods
		}
		for _, ex := range list {
			exNS := labels.Set(snap.nsLabels(ex.Pod.Namespace))
			for i := range pod.PreferredAffinityTerms {
				add(&pod.PreferredAffinityTerms[i], ex.Pod, exNS, n, int64(pod.PreferredAffinityTerms[i].Weight))
			}
			for i := range pod.PreferredAntiAffinityTerms {
				add(&pod.PreferredAntiAffinityTerms[i], ex.Pod, exNS, n, -int64(pod.PreferredAntiAffinityTerms[i].Weight))
			}
			for i := range ex.PreferredAffinityTerms {
				add(&ex.PreferredAffinityTerms[i], pod.Pod, podNS, n, int64(ex.PreferredAffinityTerms[i].Weight))
			}
			for i := range ex.PreferredAntiAffinityTerms {
				add(&ex.PreferredAntiAffinityTerms[i], pod.Pod, podNS, n, -int64(ex.PreferredAntiAffinityTerms[i].Weight))
			}
			for i := range ex.RequiredAffinityTerms {
				add(&ex.RequiredAffinityTerms[i], pod.Pod, podNS, n, hardAffinityWeight)
			}
		}
	}
	if len(pairs) == 0 {
		return NewStatus(Skip)
	}
	state.Write(affinityScoreKey, &affinityScoreState{pairs: pairs})
	return nil
}

func (interPodAffinity) Score(_ context.Context, state *CycleState, _ *PodInfo, node *NodeInfo) (int64, *Status) {
	s, _ := state.Read(affinityScoreKey).(*affinityScoreState)
	if s == nil {
		return 0, nil
	}
	var score int64
	for pair, w := range s.pairs {
		if v, ok := node.Node.Labels[pair.key]; ok && v == pair.value {
			score += w
		}
	}
	return score, nil
}

// Normalize maps [min, max] onto [0, MaxNodeScore].
func (interPodAffinity) Normalize(_ context.Context, _ *CycleState, _ *PodInfo, scores []NodeScore) *Status {
	if len(scores) == 0 {
		return nil
	}
	min, max := scores[0].Score, scores[0].Score
	for _, s := range scores {
		if s.Score < min {
			min = s.Score
		}
		if s.Score > max {
			max = s.Score
		}
	}
	for i := range scores {
		if max == min {
			scores[i].Score = 0
			continue
		}
		scores[i].Score = MaxNodeScore * (scores[i].Score - min) / (max - min)
	}
	return nil
}
