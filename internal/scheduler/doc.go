// Package scheduler is kubelab's kube-scheduler ("default-scheduler"): it watches pods
// without a node whose spec.schedulerName is its own and binds each to a node through
// pods/binding.
//
// It is the scheduling step of the flow (API server → scheduler → kubelet): it filters
// and scores the nodes for each pod and binds it to one, and for a claim of a
// WaitForFirstConsumer class the node it picks decides the zone the volume is created
// in. The shape is upstream's scheduling framework:
//
//   - a SchedulingQueue with activeQ (priority, then age), backoffQ (1 s doubling to 10 s)
//     and the unschedulable pods, which cluster events (node add/update, assigned pod
//     add/update/delete, PVC, PV, StorageClass, CSINode, CSIDriver) move back when one of
//     the plugins that rejected them cares about the event; after 5 min they are retried
//     anyway;
//   - a scheduling cycle (one pod at a time): PreFilter, Filter over the nodes in parallel
//     (stopping at upstream's adaptive share of feasible nodes), PreScore/Score/Normalize
//     with upstream's weights, the host chosen at random among the best, then Reserve and
//     the pod assumed in the cache;
//   - a binding cycle per pod (concurrent): PreBind (VolumeBinding may wait there until the
//     claims are bound) and Bind (pods/binding);
//   - PostFilter (DefaultPreemption) when no node fits.
//
// Plugins: NodeUnschedulable, NodeName, TaintToleration, NodeAffinity (+nodeSelector),
// NodePorts (hostPorts: the same protocol and port conflict on the same hostIP or when
// either is 0.0.0.0), NodeResourcesFit (LeastAllocated) and NodeResourcesBalancedAllocation, NodeVolumeLimits
// (CSINode allocatable count), VolumeBinding, VolumeZone, PodTopologySpread,
// InterPodAffinity, DefaultPreemption, DefaultBinder. Their decisions are pure functions
// of the pod, the node and the listers' objects, tested with tables. A pod being resized
// in place holds, per resource, the larger of its spec's requests and what its kubelet
// allocated (status.containerStatuses[].allocatedResources and resources), as upstream
// counts it; a resize down moves the pods NodeResourcesFit rejected back to the queue.
//
// Contract, as upstream: Events from component "default-scheduler" — Scheduled
// ("Successfully assigned default/x to node-a") and FailedScheduling ("0/3 nodes are
// available: 1 node(s) had volume node affinity conflict, 2 Insufficient cpu. preemption:
// …"); the pod's PodScheduled=False condition with reason Unschedulable (SchedulerError for
// errors) and status.nominatedNodeName after a preemption; the PVC annotation
// volume.kubernetes.io/selected-node for WaitForFirstConsumer claims; PV claimRef (with
// pv.kubernetes.io/bound-by-controller) for static PVs it chooses; victims get the
// DisruptionTarget condition, a Preempted event and a delete. It talks to the API server
// only, through client-go.
package scheduler
