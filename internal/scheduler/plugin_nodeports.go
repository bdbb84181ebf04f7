package scheduler

import (
	"context"

	"github.com/kubelab/kubelab/internal/util/hostport"
)

// reasonNodePorts is upstream's NodePorts reason.
const reasonNodePorts = "node(s) didn't have free ports for the requested pod ports"

// nodePorts rejects nodes where a pod already holds one of the pod's hostPorts: the same
// protocol and port, on the same host address or with either on every address (hostIP
// empty or 0.0.0.0). Pods without hostPorts skip it.
type nodePorts struct{}

func (nodePorts) Name() string { return NodePortsName }

func (nodePorts) PreFilter(_ context.Context, _ *CycleState, pod *PodInfo, _ *Snapshot) *Status {
	if len(pod.HostPorts) == 0 {
		return NewStatus(Skip)
	}
	return nil
}

func (nodePorts) Filter(_ context.Context, _ *CycleState, pod *PodInfo, node *NodeInfo) *Status {
	if !portsFit(pod, node) {
		return NewStatus(Unschedulable, reasonNodePorts)
	}
	return nil
}

// portsFit says whether none of pod's hostPorts is held on node.
func portsFit(pod *PodInfo, node *NodeInfo) bool {
	for _, other := range node.Pods {
		if len(hostport.Taken(pod.HostPorts, other.HostPorts)) > 0 {
			return false
		}
	}
	return true
}
