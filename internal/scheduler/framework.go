package scheduler

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// MaxNodeScore is the top of every normalized score.
const MaxNodeScore int64 = 100

// Plugin is one scheduling concern, named as upstream names it.
type Plugin interface{ Name() string }

// PreFilterPlugin computes what its Filter needs once per pod. It may answer Skip (nothing
// to check), or reject the pod for every node.
type PreFilterPlugin interface {
	Plugin
	PreFilter(ctx context.Context, state *CycleState, pod *PodInfo, snap *Snapshot) *Status
}

// FilterPlugin says whether the pod fits one node. It runs concurrently for many nodes and
// must only read shared state.
type FilterPlugin interface {
	Plugin
	Filter(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeInfo) *Status
}

// PodStateUpdater lets preemption's dry run take pods out of (or add them to) what a
// PreFilter computed.
type PodStateUpdater interface {
	AddPod(state *CycleState, pod *PodInfo, toAdd *PodInfo, node *NodeInfo)
	RemovePod(state *CycleState, pod *PodInfo, toRemove *PodInfo, node *NodeInfo)
}

// PostFilterPlugin runs when no node fits (preemption). It may nominate a node.
type PostFilterPlugin interface {
	Plugin
	PostFilter(ctx context.Context, state *CycleState, pod *PodInfo, snap *Snapshot, statuses map[string]*Status) (nominated string, s *Status)
}

// PreScorePlugin prepares scoring over the feasible nodes.
type PreScorePlugin interface {
	Plugin
	PreScore(ctx context.Context, state *CycleState, pod *PodInfo, nodes []*NodeInfo, snap *Snapshot) *Status
}

// NodeScore is one node's score.
type NodeScore struct {
	Name  string
	Score int64
}

// ScorePlugin ranks a feasible node; Normalize brings the scores into [0, MaxNodeScore].
type ScorePlugin interface {
	Plugin
	Score(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeInfo) (int64, *Status)
	Normalize(ctx context.Context, state *CycleState, pod *PodInfo, scores []NodeScore) *Status
}

// ReservePlugin keeps its own view in step with the choice before binding; Unreserve undoes.
type ReservePlugin interface {
	Plugin
	Reserve(ctx context.Context, state *CycleState, pod *PodInfo, node string) *Status
	Unreserve(ctx context.Context, state *CycleState, pod *PodInfo, node string)
}

// PreBindPlugin runs in the binding cycle before Bind (e.g. volume binding, which may wait).
type PreBindPlugin interface {
	Plugin
	PreBind(ctx context.Context, state *CycleState, pod *PodInfo, node string) *Status
}

// BindPlugin writes the decision.
type BindPlugin interface {
	Plugin
	Bind(ctx context.Context, state *CycleState, pod *PodInfo, node string) *Status
}

// StateData is a plugin's per-cycle data.
type StateData interface{ Clone() StateData }

// CycleState carries the plugins' data through one scheduling attempt.
type CycleState struct {
	mu         sync.RWMutex
	data       map[string]StateData
	skipFilter sets.Set[string]
	skipScore  sets.Set[string]
	// filters are the Filter plugins not skipped at PreFilter (nil: all).
	filters []FilterPlugin
}

// NewCycleState is empty.
func NewCycleState() *CycleState {
	return &CycleState{data: map[string]StateData{}, skipFilter: sets.New[string](), skipScore: sets.New[string]()}
}

// Read returns key's data or nil.
func (c *CycleState) Read(key string) StateData {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.data[key]
}

// Write stores key's data.
func (c *CycleState) Write(key string, v StateData) {
	c.mu.Lock()
	c.data[key] = v
	c.mu.Unlock()
}

// Clone deep-copies the data (for preemption's dry runs).
func (c *CycleState) Clone() *CycleState {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := NewCycleState()
	for k, v := range c.data {
		n.data[k] = v.Clone()
	}
	n.skipFilter = c.skipFilter.Clone()
	n.skipScore = c.skipScore.Clone()
	n.filters = c.filters
	return n
}

// Snapshot is the cluster as the scheduler sees it for one cycle (read only).
type Snapshot struct {
	Nodes  []*NodeInfo
	byName map[string]*NodeInfo
	// NodesWithAffinityPods / NodesWithRequiredAntiAffinityPods are subsets of Nodes.
	NodesWithAffinityPods             []*NodeInfo
	NodesWithRequiredAntiAffinityPods []*NodeInfo
	// NamespaceLabels gives a namespace's labels (for namespaceSelector terms).
	NamespaceLabels func(ns string) map[string]string
}

// NewSnapshot indexes nodes.
func NewSnapshot(nodes []*NodeInfo) *Snapshot {
	s := &Snapshot{Nodes: nodes, byName: make(map[string]*NodeInfo, len(nodes))}
	for _, n := range nodes {
		s.byName[n.Name()] = n
		if len(n.PodsWithAffinity) > 0 {
			s.NodesWithAffinityPods = append(s.NodesWithAffinityPods, n)
		}
		if len(n.PodsWithRequiredAntiAffinity) > 0 {
			s.NodesWithRequiredAntiAffinityPods = append(s.NodesWithRequiredAntiAffinityPods, n)
		}
	}
	return s
}

// Get returns the named node or nil.
func (s *Snapshot) Get(name string) *NodeInfo { return s.byName[name] }

func (s *Snapshot) nsLabels(ns string) map[string]string {
	if s.NamespaceLabels == nil {
		return nil
	}
	return s.NamespaceLabels(ns)
}

// Profile is an ordered set of plugins, with score weights.
type Profile struct {
	PreFilter  []PreFilterPlugin
	Filter     []FilterPlugin
	PostFilter []PostFilterPlugin
	PreScore   []PreScorePlugin
	Score      []ScorePlugin
	Weights    map[string]int64
	Reserve    []ReservePlugin
	PreBind    []PreBindPlugin
	Bind       []BindPlugin
}

// addPlugin puts p at every extension point it implements.
func (p *Profile) addPlugin(pl Plugin, weight int64) {
	if x, ok := pl.(PreFilterPlugin); ok {
		p.PreFilter = append(p.PreFilter, x)
	}
	if x, ok := pl.(FilterPlugin); ok {
		p.Filter = append(p.Filter, x)
	}
	if x, ok := pl.(PostFilterPlugin); ok {
		p.PostFilter = append(p.PostFilter, x)
	}
	if x, ok := pl.(PreScorePlugin); ok {
		p.PreScore = append(p.PreScore, x)
	}
	if x, ok := pl.(ScorePlugin); ok {
		p.Score = append(p.Score, x)
		if p.Weights == nil {
			p.Weights = map[string]int64{}
		}
		p.Weights[pl.Name()] = weight
	}
	if x, ok := pl.(ReservePlugin); ok {
		p.Reserve = append(p.Reserve, x)
	}
	if x, ok := pl.(PreBindPlugin); ok {
		p.PreBind = append(p.PreBind, x)
	}
	if x, ok := pl.(BindPlugin); ok {
		p.Bind = append(p.Bind, x)
	}
}

// RunPreFilter runs the PreFilter plugins; a rejection applies to all nodes.
func (p *Profile) RunPreFilter(ctx context.Context, state *CycleState, pod *PodInfo, snap *Snapshot) *Status {
	for _, pl := range p.PreFilter {
		s := pl.PreFilter(ctx, state, pod, snap)
		switch {
		case s.IsSkip():
			state.skipFilter.Insert(pl.Name())
		case !s.IsSuccess():
			return s.WithPlugin(pl.Name())
		}
	}
	state.filters = make([]FilterPlugin, 0, len(p.Filter))
	for _, pl := range p.Filter {
		if !state.skipFilter.Has(pl.Name()) {
			state.filters = append(state.filters, pl)
		}
	}
	return nil
}

// RunFilter runs the Filter plugins on one node; the first rejection wins.
func (p *Profile) RunFilter(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeInfo) *Status {
	filters := state.filters
	if filters == nil {
		filters = p.Filter
	}
	for _, pl := range filters {
		if s := pl.Filter(ctx, state, pod, node); !s.IsSuccess() {
			if !s.IsRejected() {
				return AsStatus(fmt.Errorf("running %q filter plugin: %w", pl.Name(), s.AsError())).WithPlugin(pl.Name())
			}
			return s.WithPlugin(pl.Name())
		}
	}
	return nil
}

// RunScore scores the feasible nodes: Σ weight × normalized score.
func (p *Profile) RunScore(ctx context.Context, state *CycleState, pod *PodInfo, nodes []*NodeInfo, snap *Snapshot) ([]NodeScore, *Status) {
	for _, pl := range p.PreScore {
		s := pl.PreScore(ctx, state, pod, nodes, snap)
		if s.IsSkip() {
			state.skipScore.Insert(pl.Name())
			continue
		}
		if !s.IsSuccess() {
			return nil, s.WithPlugin(pl.Name())
		}
	}
	total := make([]NodeScore, len(nodes))
	for i, n := range nodes {
		total[i].Name = n.Name()
	}
	scores := make([]NodeScore, len(nodes))
	for _, pl := range p.Score {
		if state.skipScore.Has(pl.Name()) {
			continue
		}
		for i, n := range nodes {
			v, s := pl.Score(ctx, state, pod, n)
			if !s.IsSuccess() {
				return nil, s.WithPlugin(pl.Name())
			}
			scores[i] = NodeScore{Name: n.Name(), Score: v}
		}
		if s := pl.Normalize(ctx, state, pod, scores); !s.IsSuccess() {
			return nil, s.WithPlugin(pl.Name())
		}
		w := p.Weights[pl.Name()]
		for i := range scores {
			total[i].Score += scores[i].Score * w
		}
	}
	return total, nil
}

// normalizeMax scales scores to [0, MaxNodeScore] by the highest; reverse makes the lowest best.
func normalizeMax(scores []NodeScore, reverse bool) {
	var max int64
	for _, s := range scores {
		if s.Score > max {
			max = s.Score
		}
	}
	if max == 0 {
		if reverse {
			for i := range scores {
				scores[i].Score = MaxNodeScore
			}
		}
		return
	}
	for i := range scores {
		v := MaxNodeScore * scores[i].Score / max
		if reverse {
			v = MaxNodeScore - v
		}
		scores[i].Score = v
	}
}

// noNormalize is for plugins whose scores are already in range.
type noNormalize struct{}

func (noNormalize) Normalize(context.Context, *CycleState, *PodInfo, []NodeScore) *Status { return nil }

// podKey is "namespace/name".
func podKey(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }
