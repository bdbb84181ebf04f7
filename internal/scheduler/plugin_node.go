package scheduler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// Reasons, worded as upstream's plugins word them.
const (
	reasonNodeName          = "node(s) didn't match the requested node name"
	reasonNodeUnschedulable = "node(s) were unschedulable"
	reasonNodeAffinity      = "node(s) didn't match Pod's node affinity/selector"
	reasonNodeNotFound      = "node(s) not found"
)

// Plugin names, as upstream's.
const (
	NodeNameName           = "NodeName"
	NodeUnschedulableName  = "NodeUnschedulable"
	TaintTolerationName    = "TaintToleration"
	NodeAffinityName       = "NodeAffinity"
	NodePortsName          = "NodePorts"
	NodeResourcesFitName   = "NodeResourcesFit"
	BalancedAllocationName = "NodeResourcesBalancedAllocation"
	PodTopologySpreadName  = "PodTopologySpread"
	InterPodAffinityName   = "InterPodAffinity"
	VolumeBindingName      = "VolumeBinding"
	VolumeZoneName         = "VolumeZone"
	NodeVolumeLimitsName   = "NodeVolumeLimits"
	DefaultPreemptionName  = "DefaultPreemption"
	DefaultBinderName      = "DefaultBinder"
	VolumeRestrictionsName = "VolumeRestrictions"
)

// nodeName rejects nodes other than the one the pod names.
type nodeName struct{}

func (nodeName) Name() string { return NodeNameName }
func (nodeName) Filter(_ context.Context, _ *CycleState, pod *PodInfo, node *NodeInfo) *Status {
	if node.Node == nil {
		return NewStatus(UnschedulableAndUnresolvable, reasonNodeNotFound)
	}
	if !fitsNodeName(pod.Pod, node.Node) {
		return NewStatus(UnschedulableAndUnresolvable, reasonNodeName)
	}
	return nil
}

// fitsNodeName: an empty spec.nodeName fits any node.
func fitsNodeName(pod *corev1.Pod, node *corev1.Node) bool {
	return pod.Spec.NodeName == "" || pod.Spec.NodeName == node.Name
}

// nodeUnschedulable rejects cordoned nodes unless the pod tolerates the cordon taint.
type nodeUnschedulable struct{}

func (nodeUnschedulable) Name() string { return NodeUnschedulableName }
func (nodeUnschedulable) Filter(_ context.Context, _ *CycleState, pod *PodInfo, node *NodeInfo) *Status {
	if !fitsUnschedulable(pod.Pod, node.Node) {
		return NewStatus(UnschedulableAndUnresolvable, reasonNodeUnschedulable)
	}
	return nil
}

func fitsUnschedulable(pod *corev1.Pod, node *corev1.Node) bool {
	if !node.Spec.Unschedulable {
		return true
	}
	return corev1helpers.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, &corev1.Taint{
		Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}, false)
}

// taintToleration rejects nodes with a NoSchedule/NoExecute taint the pod does not
// tolerate, and prefers nodes with fewer untolerated PreferNoSchedule taints.
type taintToleration struct{}

func (taintToleration) Name() string { return TaintTolerationName }
func (taintToleration) Filter(_ context.Context, _ *CycleState, pod *PodInfo, node *NodeInfo) *Status {
	if taint, ok := untoleratedTaint(pod.Pod, node.Node); ok {
		return NewStatus(UnschedulableAndUnresolvable, fmt.Sprintf("node(s) had untolerated taint {%s: %s}", taint.Key, taint.Value))
	}
	return nil
}

// untoleratedTaint returns the first NoSchedule/NoExecute taint the pod does not tolerate.
func untoleratedTaint(pod *corev1.Pod, node *corev1.Node) (corev1.Taint, bool) {
	if len(node.Spec.Taints) == 0 {
		return corev1.Taint{}, false
	}
	return corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false)
}

func (taintToleration) Score(_ context.Context, _ *CycleState, pod *PodInfo, node *NodeInfo) (int64, *Status) {
	var n int64
	for i := range node.Node.Spec.Taints {
		t := &node.Node.Spec.Taints[i]
		if t.Effect != corev1.TaintEffectPreferNoSchedule {
			continue
		}
		tolerated := false
		for _, tol := range pod.Pod.Spec.Tolerations {
			if (tol.Effect == "" || tol.Effect == corev1.TaintEffectPreferNoSchedule) && tol.ToleratesTaint(klog.Background(), t, false) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			n++
		}
	}
	return n, nil
}

func (taintToleration) Normalize(_ context.Context, _ *CycleState, _ *PodInfo, scores []NodeScore) *Status {
	normalizeMax(scores, true)
	return nil
}

// nodeAffinity applies spec.nodeSelector and required node affinity, and scores the
// preferred terms.
type nodeAffinity struct{}

type nodeAffinityState struct {
	required  nodeaffinity.RequiredNodeAffinity
	preferred *nodeaffinity.PreferredSchedulingTerms
}

func (s *nodeAffinityState) Clone() StateData { return s }

func (nodeAffinity) Name() string { return NodeAffinityName }

func (nodeAffinity) PreFilter(_ context.Context, state *CycleState, pod *PodInfo, _ *Snapshot) *Status {
	p := pod.Pod
	if len(p.Spec.NodeSelector) == 0 && (p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity == nil ||
		p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil) {
		return NewStatus(Skip)
	}
	state.Write(NodeAffinityName, &nodeAffinityState{required: nodeaffinity.GetRequiredNodeAffinity(p)})
	return nil
}

func (nodeAffinity) Filter(_ context.Context, state *CycleState, pod *PodInfo, node *NodeInfo) *Status {
	s, _ := state.Read(NodeAffinityName).(*nodeAffinityState)
	if s == nil {
		s = &nodeAffinityState{required: nodeaffinity.GetRequiredNodeAffinity(pod.Pod)}
	}
	ok, err := s.required.Match(node.Node)
	if err != nil {
		return AsStatus(err)
	}
	if !ok {
		return NewStatus(UnschedulableAndUnresolvable, reasonNodeAffinity)
	}
	return nil
}

const nodeAffinityScoreKey = NodeAffinityName + "/score"

func (nodeAffinity) PreScore(_ context.Context, state *CycleState, pod *PodInfo, _ []*NodeInfo, _ *Snapshot) *Status {
	a := pod.Pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		return NewStatus(Skip)
	}
	terms, err := nodeaffinity.NewPreferredSchedulingTerms(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	if err != nil {
		return AsStatus(err)
	}
	state.Write(nodeAffinityScoreKey, &nodeAffinityState{preferred: terms})
	return nil
}

func (nodeAffinity) Score(_ context.Context, state *CycleState, _ *PodInfo, node *NodeInfo) (int64, *Status) {
	s, _ := state.Read(nodeAffinityScoreKey).(*nodeAffinityState)
	if s == nil || s.preferred == nil {
		return 0, nil
	}
	return s.preferred.Score(node.Node), nil
}

func (nodeAffinity) Normalize(_ context.Context, _ *CycleState, _ *PodInfo, scores []NodeScore) *Status {
	normalizeMax(scores, false)
	return nil
}
