// Package podutil holds the facts about a pod that several components read the same way:
// whether it is running and ready, since when it has been ready, whether it has been ready
// long enough to count as available, and its quality-of-service class.
//
// Plain readiness (the Ready condition is True) is k8s.io/kubectl/pkg/util/podutils'
// IsPodReady, which callers use directly; this package adds only what podutils does not
// say in the form the controllers need (durations and times rather than whole seconds).
// The QoS class is k8s.io/kubectl/pkg/util/qos' computation over the pod's requests as
// the API server defaults them.
//
// It is a leaf: it imports no kubelab component, so the API server, the controllers, the
// kubelet and trace may all read it. It implements no step of the flow itself; it is the
// one definition the steps that look at a pod's readiness (endpoints, rollouts,
// disruption budgets, evictions, autoscaling, the trace) and at its QoS class (admission,
// the kubelet's status and its containers' OOM scores) share.
package podutil
