// Package podautoscaler is the HorizontalPodAutoscaler controller of the
// controller-manager ("horizontal-pod-autoscaler"): every sync period (15s) it sets the
// replicas of each autoscaler's scale target from the resource usage of the target's
// pods, as kube-controller-manager's podautoscaler does.
//
// Contract:
//   - Targets are read and rescaled through their /scale subresource (any kind the API
//     server serves one for), the pods through the target's scale selector.
//   - Resource and ContainerResource metrics (cpu, memory; AverageUtilization and
//     AverageValue targets) come from metrics.k8s.io/v1beta1 PodMetrics. The desired
//     count is ceil(current ready pods × usage / target), unchanged within the tolerance
//     (0.1, or the behavior's); pods without a sample count as using nothing on a scale
//     up and 100% of their request (or the target) on a scale down, unready pods and pods
//     whose CPU sample may be from their start-up as using nothing on a scale up; deleted
//     and failed pods are ignored. Requests are the pod-level ones when set, else the sum
//     over the containers and sidecars. The largest proposal of the metrics wins. Pods,
//     Object and External metrics fail: no custom or external metrics API is served.
//   - The count is bounded by minReplicas (1 by default) and maxReplicas. Without a
//     behavior, scale downs take the highest recommendation of the last 5 minutes and
//     scale ups at most max(2 × current, 4). With one (missing fields take the API's
//     defaults: scale up unstabilized by max(4 pods, 100%) per 15s, scale down stabilized
//     over 5 minutes by 100% per 15s), the stabilization windows and policies apply.
//   - A target at 0 replicas is left alone (ScalingActive=False, ScalingDisabled).
//   - Status: currentReplicas, desiredReplicas, currentMetrics, lastScaleTime,
//     observedGeneration and the AbleToScale, ScalingActive, ScalingLimited (and, on a
//     rescale, ScaledToZero) conditions with upstream's reasons and messages, written
//     through /status when it changed. Events: SuccessfulRescale ("New size: %d; reason:
//     %s"), FailedRescale, FailedGetScale, FailedGetResourceMetric,
//     FailedComputeMetricsReplicas, SelectorRequired, InvalidSelector, AmbiguousSelector,
//     FailedUpdateStatus.
//
// The replica calculation (replicas.go) and the stabilization and rate limits
// (behavior.go) are pure functions of their inputs and the time.
package podautoscaler
