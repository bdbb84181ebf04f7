package scheduler

import (
	"context"
	"math"
	"sort"
)

// nodeResourcesFit rejects nodes without room for the pod's requests and, as upstream's
// default LeastAllocated strategy, prefers the emptier nodes.
type nodeResourcesFit struct {
	// nominated returns the pods nominated to a node by preemption that take priority
	// over pod (so their room is kept for them).
	nominated func(node string, pod *PodInfo) []*PodInfo
}

func (*nodeResourcesFit) Name() string { return NodeResourcesFitName }

func (f *nodeResourcesFit) Filter(_ context.Context, _ *CycleState, pod *PodInfo, node *NodeInfo) *Status {
	var extra []*PodInfo
	if f.nominated != nil {
		extra = f.nominated(node.Name(), pod)
	}
	if reasons := insufficientResources(pod, node, extra); len(reasons) > 0 {
		return NewStatus(Unschedulable, reasons...)
	}
	return nil
}

// insufficientResources lists upstream's reasons ("Too many pods", "Insufficient cpu", …)
// for why pod does not fit on node next to the extra pods.
func insufficientResources(pod *PodInfo, node *NodeInfo, extra []*PodInfo) []string {
	var reasons []string
	requested := node.Requested
	pods := len(node.Pods)
	if len(extra) > 0 {
		requested = requested.clone()
		for _, e := range extra {
			requested.add(e.Requests, 1)
		}
		pods += len(extra)
	}
	if pods+1 > node.AllowedPods {
		reasons = append(reasons, "Too many pods")
	}
	r := pod.Requests
	if r.MilliCPU > 0 && r.MilliCPU > node.Allocatable.MilliCPU-requested.MilliCPU {
		reasons = append(reasons, "Insufficient cpu")
	}
	if r.Memory > 0 && r.Memory > node.Allocatable.Memory-requested.Memory {
		reasons = append(reasons, "Insufficient memory")
	}
	if r.EphemeralStorage > 0 && r.EphemeralStorage > node.Allocatable.EphemeralStorage-requested.EphemeralStorage {
		reasons = append(reasons, "Insufficient ephemeral-storage")
	}
	var scalar []string
	for name, v := range r.Scalar {
		if v > 0 && v > node.Allocatable.Scalar[name]-requested.Scalar[name] {
			scalar = append(scalar, "Insufficient "+string(name))
		}
	}
	sort.Strings(scalar)
	return append(reasons, scalar...)
}

func (*nodeResourcesFit) Score(_ context.Context, _ *CycleState, pod *PodInfo, node *NodeInfo) (int64, *Status) {
	return leastAllocatedScore(pod, node), nil
}

func (*nodeResourcesFit) Normalize(context.Context, *CycleState, *PodInfo, []NodeScore) *Status {
	return nil
}

// leastAllocatedScore averages, over cpu and memory, the share left free after placing pod.
func leastAllocatedScore(pod *PodInfo, node *NodeInfo) int64 {
	free := func(req, alloc int64) int64 {
		if alloc == 0 || req > alloc {
			return 0
		}
		return (alloc - req) * MaxNodeScore / alloc
	}
	cpu := free(node.NonZero.MilliCPU+pod.NonZero.MilliCPU, node.Allocatable.MilliCPU)
	mem := free(node.NonZero.Memory+pod.NonZero.Memory, node.Allocatable.Memory)
	return (cpu + mem) / 2
}

// balancedAllocation prefers nodes whose cpu and memory shares stay close to each other.
type balancedAllocation struct{ noNormalize }

func (balancedAllocation) Name() string { return BalancedAllocationName }

func (balancedAllocation) Score(_ context.Context, _ *CycleState, pod *PodInfo, node *NodeInfo) (int64, *Status) {
	return balancedScore(pod, node), nil
}

// balancedScore is (1 − standard deviation of the cpu and memory fractions) × 100.
func balancedScore(pod *PodInfo, node *NodeInfo) int64 {
	frac := func(req, alloc int64) float64 {
		if alloc == 0 {
			return 0
		}
		f := float64(req) / float64(alloc)
		return math.Min(f, 1)
	}
	c := frac(node.NonZero.MilliCPU+pod.NonZero.MilliCPU, node.Allocatable.MilliCPU)
	m := frac(node.NonZero.Memory+pod.NonZero.Memory, node.Allocatable.Memory)
	std := math.Abs(c-m) / 2
	return int64((1 - std) * float64(MaxNodeScore))
}
