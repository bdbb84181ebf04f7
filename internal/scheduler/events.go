package scheduler

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Which plugins' rejections a cluster event may lift (upstream's EventsToRegister, coarse).
var (
	interestNodeAdd = sets.New(NodeNameName, NodeUnschedulableName, TaintTolerationName, NodeAffinityName,
		NodePortsName, NodeResourcesFitName, PodTopologySpreadName, InterPodAffinityName, VolumeBindingName, VolumeZoneName,
		NodeVolumeLimitsName)
	interestAssignedPodDelete = sets.New(NodePortsName, NodeResourcesFitName, InterPodAffinityName, PodTopologySpreadName,
		NodeVolumeLimitsName, VolumeRestrictionsName)
	interestAssignedPodChange = sets.New(InterPodAffinityName, PodTopologySpreadName)
	// An assigned pod resized in place to less cpu or memory.
	interestAssignedPodScaleDown = sets.New(NodeResourcesFitName)
	interestPVC                  = sets.New(VolumeBindingName, VolumeZoneName, NodeVolumeLimitsName, VolumeRestrictionsName)
	interestPV                   = sets.New(VolumeBindingName, VolumeZoneName, NodeVolumeLimitsName)
	interestStorageClass         = sets.New(VolumeBindingName)
	interestCSINode              = sets.New(VolumeBindingName, NodeVolumeLimitsName)
	interestCSIDriver            = sets.New(VolumeBindingName, NodeVolumeLimitsName)
)

// nodeUpdateInterest says which plugins a node update concerns; empty when nothing the
// scheduler reads changed (heartbeats, conditions, images).
func nodeUpdateInterest(old, node *corev1.Node) sets.Set[string] {
	out := sets.New[string]()
	if !apiequality.Semantic.DeepEqual(old.Status.Allocatable, node.Status.Allocatable) {
		out.Insert(NodeResourcesFitName)
	}
	if !maps.Equal(old.Labels, node.Labels) {
		out.Insert(NodeAffinityName, PodTopologySpreadName, InterPodAffinityName, VolumeBindingName, VolumeZoneName)
	}
	if !apiequality.Semantic.DeepEqual(old.Spec.Taints, node.Spec.Taints) {
		out.Insert(TaintTolerationName, PodTopologySpreadName)
	}
	if old.Spec.Unschedulable != node.Spec.Unschedulable {
		out.Insert(NodeUnschedulableName)
	}
	return out
}

// podLabelsChanged: an assigned pod's labels changed (affinity and spread count them).
func podLabelsChanged(old, pod *corev1.Pod) bool { return !maps.Equal(old.Labels, pod.Labels) }

// podScaledDown: an assigned pod now holds less cpu or memory than before (an in-place
// resize down).
func podScaledDown(old, pod *corev1.Pod) bool {
	was, now := requestsOf(old), requestsOf(pod)
	return now.MilliCPU < was.MilliCPU || now.Memory < was.Memory
}

func equalStringMaps(a, b map[string]string) bool { return maps.Equal(a, b) }

func specEqual(a, b *corev1.PodSpec) bool { return apiequality.Semantic.DeepEqual(a, b) }
