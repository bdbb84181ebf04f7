package scheduler

import (
	"context"
	"math"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

const (
	reasonSpreadNotMatch     = "node(s) didn't match pod topology spread constraints"
	reasonSpreadMissingLabel = "node(s) didn't match pod topology spread constraints (missing required label)"
)

// podTopologySpread enforces the pod's DoNotSchedule topology spread constraints and
// prefers nodes that lower the skew of its ScheduleAnyway ones.
type podTopologySpread struct{}

type spreadConstraint struct {
	maxSkew     int32
	key         string
	selector    labels.Selector
	minDomains  int32
	honorAffin  bool
	honorTaints bool
	scoreWeight float64
}

type spreadState struct {
	constraints []spreadConstraint
	counts      []map[string]int // per constraint: domain value → matching pods
	affinity    nodeaffinity.RequiredNodeAffinity
}

func (s *spreadState) Clone() StateData {
	c := &spreadState{constraints: s.constraints, affinity: s.affinity, counts: make([]map[string]int, len(s.counts))}
	for i, m := range s.counts {
		c.counts[i] = make(map[string]int, len(m))
		for k, v := range m {
			c.counts[i][k] = v
		}
	}
	return c
}

func (podTopologySpread) Name() string { return PodTopologySpreadName }

// spreadConstraints parses the pod's constraints with the given whenUnsatisfiable.
func spreadConstraints(pod *corev1.Pod, action corev1.UnsatisfiableConstraintAction) ([]spreadConstraint, error) {
	var out []spreadConstraint
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != action {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil {
			return nil, err
		}
		for _, k := range c.MatchLabelKeys {
			if v, ok := pod.Labels[k]; ok {
				r, err := labels.NewRequirement(k, "in", []string{v})
				if err == nil {
					sel = sel.Add(*r)
				}
			}
		}
		sc := spreadConstraint{maxSkew: c.MaxSkew, key: c.TopologyKey, selector: sel, minDomains: 1,
			honorAffin:  c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor,
			honorTaints: c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor}
		if c.MinDomains != nil {
			sc.minDomains = *c.MinDomains
		}
		out = append(out, sc)
	}
	return out, nil
}

// countSpread counts, per constraint and domain, the pods matching the constraint in the
// pod's namespace on the eligible nodes.
func countSpread(pod *corev1.Pod, cs []spreadConstraint, affinity nodeaffinity.RequiredNodeAffinity, nodes []*NodeInfo) []map[string]int {
	counts := make([]map[string]int, len(cs))
	for i := range counts {
		counts[i] = map[string]int{}
	}
	for _, n := range nodes {
		for i, c := range cs {
			if !spreadEligible(pod, c, affinity, n.Node) {
				continue
			}
			v := n.Node.Labels[c.key]
			counts[i][v] += countMatching(n, pod.Namespace, c.selector)
		}
	}
	return counts
}

func spreadEligible(pod *corev1.Pod, c spreadConstraint, affinity nodeaffinity.RequiredNodeAffinity, node *corev1.Node) bool {
	if _, ok := node.Labels[c.key]; !ok {
		return false
	}
	if c.honorAffin {
		if ok, _ := affinity.Match(node); !ok {
			return false
		}
	}
	if c.honorTaints {
		if _, bad := untoleratedTaint(pod, node); bad {
			return false
		}
	}
	return true
}

func countMatching(n *NodeInfo, ns string, sel labels.Selector) int {
	k := 0
	for _, p := range n.Pods {
		if p.Pod.Namespace == ns && p.Pod.DeletionTimestamp == nil && sel.Matches(labels.Set(p.Pod.Labels)) {
			k++
		}
	}
	return k
}

func (podTopologySpread) PreFilter(_ context.Context, state *CycleState, pod *PodInfo, snap *Snapshot) *Status {
	cs, err := spreadConstraints(pod.Pod, corev1.DoNotSchedule)
	if err != nil {
		return AsStatus(err)
	}
	if len(cs) == 0 {
		return NewStatus(Skip)
	}
	aff := nodeaffinity.GetRequiredNodeAffinity(pod.Pod)
	state.Write(PodTopologySpreadName, &spreadState{constraints: cs, affinity: aff, counts: countSpread(pod.Pod, cs, aff, snap.Nodes)})
	return nil
}

func (podTopologySpread) Filter(_ context.Context, state *CycleState, pod *PodInfo, node *NodeInfo) *Status {
	s, _ := state.Read(PodTopologySpreadName).(*spreadState)
	if s == nil {
		return nil
	}
	return spreadFits(pod.Pod, s, node.Node)
}

// spreadFits checks each constraint: count(domain) + self − min(count) ≤ maxSkew.
func spreadFits(pod *corev1.Pod, s *spreadState, node *corev1.Node) *Status {
	for i, c := range s.constraints {
		v, ok := node.Labels[c.key]
		if !ok {
			return NewStatus(UnschedulableAndUnresolvable, reasonSpreadMissingLabel)
		}
		min := 0
		if len(s.counts[i]) >= int(c.minDomains) {
			min = math.MaxInt
			for _, n := range s.counts[i] {
				if n < min {
					min = n
				}
			}
			if min == math.MaxInt {
				min = 0
			}
		}
		self := 0
		if c.selector.Matches(labels.Set(pod.Labels)) {
			self = 1
		}
		if s.counts[i][v]+self-min > int(c.maxSkew) {
			return NewStatus(Unschedulable, reasonSpreadNotMatch)
		}
	}
	return nil
}

func (podTopologySpread) AddPod(state *CycleState, pod *PodInfo, add *PodInfo, node *NodeInfo) {
	updateSpread(state, pod, add, node, 1)
}

func (podTopologySpread) RemovePod(state *CycleState, pod *PodInfo, rm *PodInfo, node *NodeInfo) {
	updateSpread(state, pod, rm, node, -1)
}

func updateSpread(state *CycleState, pod *PodInfo, other *PodInfo, node *NodeInfo, delta int) {
	s, _ := state.Read(PodTopologySpreadName).(*spreadState)
	if s == nil || other.Pod.Namespace != pod.Pod.Namespace {
		return
	}
	for i, c := range s.constraints {
		if spreadEligible(pod.Pod, c, s.affinity, node.Node) && c.selector.Matches(labels.Set(other.Pod.Labels)) {
			s.counts[i][node.Node.Labels[c.key]] += delta
		}
	}
}

const spreadScoreKey = PodTopologySpreadName + "/score"

func (podTopologySpread) PreScore(_ context.Context, state *CycleState, pod *PodInfo, _ []*NodeInfo, snap *Snapshot) *Status {
	cs, err := spreadConstraints(pod.Pod, corev1.ScheduleAnyway)
	if err != nil {
		return AsStatus(err)
	}
	if len(cs) == 0 {
		return NewStatus(Skip)
	}
	aff := nodeaffinity.GetRequiredNodeAffinity(pod.Pod)
	counts := countSpread(pod.Pod, cs, aff, snap.Nodes)
	for i := range cs {
		cs[i].scoreWeight = math.Log(float64(len(counts[i]) + 2))
	}
	state.Write(spreadScoreKey, &spreadState{constraints: cs, affinity: aff, counts: counts})
	return nil
}

func (podTopologySpread) Score(_ context.Context, state *CycleState, _ *PodInfo, node *NodeInfo) (int64, *Status) {
	s, _ := state.Read(spreadScoreKey).(*spreadState)
	if s == nil {
		return 0, nil
	}
	var score float64
	for i, c := range s.constraints {
		if v, ok := node.Node.Labels[c.key]; ok {
			score += float64(s.counts[i][v]+int(c.maxSkew)-1) * c.scoreWeight
		}
	}
	return int64(math.Round(score)), nil
}

// Normalize: fewer matching pods in the node's domains scores higher.
func (podTopologySpread) Normalize(_ context.Context, _ *CycleState, _ *PodInfo, scores []NodeScore) *Status {
	normalizeMinMaxReverse(scores)
	return nil
}

// normalizeMinMaxReverse maps the lowest score to MaxNodeScore, as upstream's spread scoring.
func normalizeMinMaxReverse(scores []NodeScore) {
	if len(scores) == 0 {
		return
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
		if max == 0 {
			scores[i].Score = MaxNodeScore
			continue
		}
		scores[i].Score = MaxNodeScore * (max + min - scores[i].Score) / max
	}
}
