package kubelet

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Metrics are the kubelet's Prometheus metrics under upstream's names: what its server
// serves at /metrics (the node's name, its pods and their containers as the kubelet last
// saw them in its runtime) and at /metrics/probes (the probes' results and durations).
type kubeletMetrics struct {
	registry, probes *prometheus.Registry
	probeTotal       *prometheus.CounterVec
	probeDuration    *prometheus.HistogramVec

	mu sync.Mutex
	// probed are the pods with probe series (their namespace/name), by UID.
	probed map[types.UID]podName
}

type podName struct{ namespace, name string }

// The container states kubelet_running_containers counts.
const (
	containerStateRunning = "running"
	containerStateExited  = "exited"
)

// Probe results as prober_probe_total labels them.
const (
	probeResultSuccessful = "successful"
	probeResultFailed     = "failed"
	probeResultUnknown    = "unknown"
)

// newKubeletMetrics makes the registries; the kubelet adds its podCollector.
func newKubeletMetrics() *kubeletMetrics {
	m := &kubeletMetrics{
		probed:   map[types.UID]podName{},
		registry: prometheus.NewRegistry(),
		probes:   prometheus.NewRegistry(),
		probeTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "prober", Name: "probe_total",
			Help: "Results of the containers' liveness, readiness and startup probes, by result."},
			[]string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}),
		probeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "prober", Name: "probe_duration_seconds",
			Help: "How long the probes that answered (successful) or could not be run (unknown) took, in seconds.", Buckets: prometheus.DefBuckets},
			[]string{"probe_type", "container", "pod", "namespace"}),
	}
	m.probes.MustRegister(m.probeTotal, m.probeDuration)
	return m
}

// Metrics is what the kubelet's server serves at /metrics.
func (k *Kubelet) Metrics() prometheus.Gatherer { return k.metrics.registry }

// ProbeMetrics is what the kubelet's server serves at /metrics/probes.
func (k *Kubelet) ProbeMetrics() prometheus.Gatherer { return k.metrics.probes }

// observeProbe counts one run of a probe of pod's container c, which took took; err
// means it could not be run.
func (m *kubeletMetrics) observeProbe(pod *corev1.Pod, c string, t ProbeType, res ProbeResult, err error, took time.Duration) {
	if m == nil {
		return
	}
	result := probeResultSuccessful
	switch {
	case err != nil:
		result = probeResultUnknown
	case res == ProbeFailure:
		result = probeResultFailed
	}
	m.mu.Lock()
	m.probed[pod.UID] = podName{pod.Namespace, pod.Name}
	m.mu.Unlock()
	m.probeTotal.WithLabelValues(string(t), result, c, pod.Name, pod.Namespace, string(pod.UID)).Inc()
	if result != probeResultFailed {
		m.probeDuration.WithLabelValues(string(t), c, pod.Name, pod.Namespace).Observe(took.Seconds())
	}
}

// forgetProbes drops the probe series of a pod whose probes stopped for good.
func (m *kubeletMetrics) forgetProbes(uid types.UID) {
	if m == nil {
		return
	}
	m.mu.Lock()
	p, ok := m.probed[uid]
	delete(m.probed, uid)
	m.mu.Unlock()
	if !ok {
		return
	}
	m.probeTotal.DeletePartialMatch(prometheus.Labels{"pod_uid": string(uid)})
	m.probeDuration.DeletePartialMatch(prometheus.Labels{"pod": p.name, "namespace": p.namespace})
}

var (
	nodeNameDesc    = prometheus.NewDesc("kubelet_node_name", "The node's name; always 1.", []string{"node"}, nil)
	runningPodsDesc = prometheus.NewDesc("kubelet_running_pods",
		"Pods whose sandbox the runtime runs.", nil, nil)
	runningContainersDesc = prometheus.NewDesc("kubelet_running_containers",
		"Container instances the runtime holds for the node's pods, by state.", []string{"container_state"}, nil)
	desiredPodsDesc = prometheus.NewDesc("kubelet_desired_pods",
		"Pods bound to the node that the kubelet runs; static is true for static pods (kubelab has none).", []string{"static"}, nil)
)

// podCollector reports the kubelet's pods when scraped.
type podCollector struct{ k *Kubelet }

func (c podCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodeNameDesc, runningPodsDesc, runningContainersDesc, desiredPodsDesc} {
		ch <- d
	}
}

func (c podCollector) Collect(ch chan<- prometheus.Metric) {
	k := c.k
	ch <- prometheus.MustNewConstMetric(nodeNameDesc, prometheus.GaugeValue, 1, k.cfg.NodeName)
	k.mu.Lock()
	running := 0
	containers := map[string]int{containerStateRunning: 0, containerStateExited: 0}
	for _, st := range k.pods {
		if !st.started {
			continue
		}
		running++
		for state, n := range containerInstances(st.states) {
			containers[state] += n
		}
	}
	k.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(runningPodsDesc, prometheus.GaugeValue, float64(running))
	for state, n := range containers {
		ch <- prometheus.MustNewConstMetric(runningContainersDesc, prometheus.GaugeValue, float64(n), state)
	}
	if pods, err := k.Pods(); err == nil {
		desired := 0
		for _, p := range pods {
			if !isMirrorPod(p) {
				desired++
			}
		}
		ch <- prometheus.MustNewConstMetric(desiredPodsDesc, prometheus.GaugeValue, float64(desired), "")
	}
}

// containerInstances counts, by state, the container instances the runtime holds for a
// running pod whose containers are in states: each container's current instance when it
// was created (running, or exited), and its previous one while the runtime keeps it as
// the last termination of a running or waiting container.
func containerInstances(states []ContainerState) map[string]int {
	out := map[string]int{}
	for _, s := range states {
		switch {
		case s.Terminated:
			out[containerStateExited]++
			continue
		case !s.Waiting && s.ContainerID != "":
			out[containerStateRunning]++
		}
		if s.LastTerminated != nil {
			out[containerStateExited]++
		}
	}
	return out
}
