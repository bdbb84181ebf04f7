package podautoscaler

import (
	"errors"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelpers "k8s.io/component-helpers/resource"

	"github.com/kubelab/kubelab/internal/util/podutil"
)

// podMetric is one pod's usage of a resource (milli-units: millicores, millibytes) and
// the sample's time and window.
type podMetric struct {
	timestamp time.Time
	window    time.Duration
	value     int64
}

// podMetrics are the pods' usage by pod name.
type podMetrics map[string]podMetric

// tolerances are how far below and above 1.0 a usage ratio may be before replicas
// change.
type tolerances struct {
	scaleDown, scaleUp float64
}

func (t tolerances) within(ratio float64) bool {
	return 1.0-t.scaleDown <= ratio && ratio <= 1.0+t.scaleUp
}

func (t tolerances) String() string {
	return fmt.Sprintf("[down:%.1f%%, up:%.1f%%]", t.scaleDown*100, t.scaleUp*100)
}

// readiness holds what decides whether a pod's CPU sample counts.
type readiness struct {
	cpuInitializationPeriod time.Duration
	initialReadinessDelay   time.Duration
	now                     time.Time
}

// groupPods sorts the target's pods for one resource: deleted and failed pods are
// ignored; pending pods are unready; pods without a sample are missing; for CPU, pods
// whose sample may reflect their start-up (unready within the initialization period, or
// ready for less than the sample's window; unready and never ready after it) are unready.
// The others are ready.
func groupPods(pods []*corev1.Pod, metrics podMetrics, resource corev1.ResourceName, r readiness) (ready int, unready, missing, ignored sets.Set[string]) {
	unready, missing, ignored = sets.New[string](), sets.New[string](), sets.New[string]()
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed {
			ignored.Insert(pod.Name)
			continue
		}
		if pod.Status.Phase == corev1.PodPending {
			unready.Insert(pod.Name)
			continue
		}
		metric, ok := metrics[pod.Name]
		if !ok {
			missing.Insert(pod.Name)
			continue
		}
		if resource == corev1.ResourceCPU && cpuSampleUnready(pod, metric, r) {
			unready.Insert(pod.Name)
			continue
		}
		ready++
	}
	return ready, unready, missing, ignored
}

func cpuSampleUnready(pod *corev1.Pod, metric podMetric, r readiness) bool {
	cond := podutil.ReadyCondition(pod)
	if cond == nil || pod.Status.StartTime == nil {
		return true
	}
	start := pod.Status.StartTime.Time
	if start.Add(r.cpuInitializationPeriod).After(r.now) {
		return cond.Status == corev1.ConditionFalse || metric.timestamp.Before(cond.LastTransitionTime.Add(metric.window))
	}
	return cond.Status == corev1.ConditionFalse && start.Add(r.initialReadinessDelay).After(cond.LastTransitionTime.Time)
}

// podRequests is each pod's request of the resource (milli-units): the named
// container's; without a container name the pod-level request when the pod sets
// pod-level requests, else the sum over its containers and sidecars. A container
// without a request is an error.
func podRequests(pods []*corev1.Pod, container string, resource corev1.ResourceName) (map[string]int64, error) {
	out := make(map[string]int64, len(pods))
	for _, pod := range pods {
		if container == "" && resourcehelpers.IsPodLevelRequestsSet(pod) {
			q, ok := resourcehelpers.PodRequests(pod, resourcehelpers.PodResourcesOptions{})[resource]
			if !ok {
				return nil, fmt.Errorf("missing pod-level request for %s in Pod %s", resource, pod.Name)
			}
			out[pod.Name] = q.MilliValue()
			continue
		}
		request, err := containerRequests(pod, container, resource)
		if err != nil {
			return nil, err
		}
		out[pod.Name] = request
	}
	return out, nil
}

func containerRequests(pod *corev1.Pod, container string, resource corev1.ResourceName) (int64, error) {
	containers := append([]corev1.Container{}, pod.Spec.Containers...)
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			containers = append(containers, c)
		}
	}
	var total int64
	for _, c := range containers {
		if container != "" && c.Name != container {
			continue
		}
		q, ok := c.Resources.Requests[resource]
		if !ok {
			return 0, fmt.Errorf("missing request for %s in container %s of Pod %s", resource, c.Name, pod.Name)
		}
		total += q.MilliValue()
		if container != "" {
			return total, nil
		}
	}
	if container != "" {
		return 0, fmt.Errorf("container %s not found in Pod %s", container, pod.Name)
	}
	return total, nil
}

// utilizationRatio is the pods' usage as a share of their requests over the target
// utilization (%), with the utilization and the average usage.
func utilizationRatio(metrics podMetrics, requests map[string]int64, target int32) (ratio float64, utilization int32, average int64, err error) {
	var usage, requested int64
	n := 0
	for name, m := range metrics {
		r, ok := requests[name]
		if !ok {
			continue
		}
		usage += m.value
		requested += r
		n++
	}
	if requested == 0 {
		return 0, 0, 0, errors.New("no metrics returned matched known pods")
	}
	utilization = int32(usage * 100 / requested)
	return float64(utilization) / float64(target), utilization, usage / int64(n), nil
}

// usageRatio is the pods' average usage over the target average, with the average.
func usageRatio(metrics podMetrics, target int64) (float64, int64) {
	var total int64
	for _, m := range metrics {
		total += m.value
	}
	average := total / int64(len(metrics))
	return float64(average) / float64(target), average
}

// replicaInput is what a replica count is computed from for one resource metric.
type replicaInput struct {
	current    int32
	pods       []*corev1.Pod
	metrics    podMetrics
	resource   corev1.ResourceName
	container  string
	tolerances tolerances
	readiness  readiness
}

// utilizationReplicas is the replica count that brings the pods' average utilization of
// the resource to target (%): the usage ratio times the ready pods when every pod has a
// sample; otherwise, once missing pods count as using nothing (scale up) or 100% of
// their request (or the target when higher; scale down), and unready pods as using
// nothing on a scale up, the recomputed ratio times the pods counted, unless that
// reverses the direction or stays within tolerance.
func utilizationReplicas(in replicaInput, target int32) (replicas, utilization int32, average int64, err error) {
	if len(in.pods) == 0 {
		return 0, 0, 0, errors.New("no pods returned by selector while calculating replica count")
	}
	metrics := copyMetrics(in.metrics)
	ready, unready, missing, ignored := groupPods(in.pods, metrics, in.resource, in.readiness)
	removeMetrics(metrics, ignored)
	removeMetrics(metrics, unready)
	if len(metrics) == 0 {
		return 0, 0, 0, errors.New("did not receive metrics for targeted pods (pods might be unready)")
	}
	requests, err := podRequests(in.pods, in.container, in.resource)
	if err != nil {
		return 0, 0, 0, err
	}
	ratio, utilization, average, err := utilizationRatio(metrics, requests, target)
	if err != nil {
		return 0, 0, 0, err
	}
	scaleUpWithUnready := unready.Len() > 0 && ratio > 1.0
	if !scaleUpWithUnready && missing.Len() == 0 {
		if in.tolerances.within(ratio) {
			return in.current, utilization, average, nil
		}
		return int32(math.Ceil(ratio * float64(ready))), utilization, average, nil
	}
	if missing.Len() > 0 {
		switch {
		case ratio < 1.0:
			fallback := int64(max(100, target))
			for name := range missing {
				metrics[name] = podMetric{value: requests[name] * fallback / 100}
			}
		case ratio > 1.0:
			for name := range missing {
				metrics[name] = podMetric{}
			}
		}
	}
	if scaleUpWithUnready {
		for name := range unready {
			metrics[name] = podMetric{}
		}
	}
	newRatio, _, _, err := utilizationRatio(metrics, requests, target)
	if err != nil {
		return 0, utilization, average, err
	}
	return adjustedReplicas(in, ratio, newRatio, len(metrics)), utilization, average, nil
}

// averageValueReplicas is the replica count that brings the pods' average usage of the
// resource (milli-units) to target, with missing and unready pods treated as for
// utilization (missing pods count as using the target on a scale down).
func averageValueReplicas(in replicaInput, target int64) (replicas int32, average int64, err error) {
	if len(in.pods) == 0 {
		return 0, 0, errors.New("no pods returned by selector while calculating replica count")
	}
	metrics := copyMetrics(in.metrics)
	ready, unready, missing, ignored := groupPods(in.pods, metrics, in.resource, in.readiness)
	removeMetrics(metrics, ignored)
	removeMetrics(metrics, unready)
	if len(metrics) == 0 {
		return 0, 0, errors.New("did not receive metrics for targeted pods (pods might be unready)")
	}
	ratio, average := usageRatio(metrics, target)
	scaleUpWithUnready := unready.Len() > 0 && ratio > 1.0
	if !scaleUpWithUnready && missing.Len() == 0 {
		if in.tolerances.within(ratio) {
			return in.current, average, nil
		}
		return int32(math.Ceil(ratio * float64(ready))), average, nil
	}
	if missing.Len() > 0 {
		switch {
		case ratio < 1.0:
			for name := range missing {
				metrics[name] = podMetric{value: target}
			}
		case ratio > 1.0:
			for name := range missing {
				metrics[name] = podMetric{}
			}
		}
	}
	if scaleUpWithUnready {
		for name := range unready {
			metrics[name] = podMetric{}
		}
	}
	newRatio, _ := usageRatio(metrics, target)
	return adjustedReplicas(in, ratio, newRatio, len(metrics)), average, nil
}

// adjustedReplicas is the replica count from the ratio recomputed with assumed samples:
// the current count when it is within tolerance or flips the direction of the first
// ratio, or when the pods counted would move the count the other way.
func adjustedReplicas(in replicaInput, ratio, newRatio float64, counted int) int32 {
	if in.tolerances.within(newRatio) || (ratio < 1.0 && newRatio > 1.0) || (ratio > 1.0 && newRatio < 1.0) {
		return in.current
	}
	replicas := int32(math.Ceil(newRatio * float64(counted)))
	if (newRatio < 1.0 && replicas > in.current) || (newRatio > 1.0 && replicas < in.current) {
		return in.current
	}
	return replicas
}

func copyMetrics(m podMetrics) podMetrics {
	out := make(podMetrics, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func removeMetrics(m podMetrics, names sets.Set[string]) {
	for name := range names {
		delete(m, name)
	}
}
