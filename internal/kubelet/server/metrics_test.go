package server

import (
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/component-base/metrics/testutil"

	"github.com/kubelab/kubelab/internal/hollow"
	"github.com/kubelab/kubelab/internal/kubelet/kuberuntime/fakecri"
)

// scrape gets path and parses the answer as the Prometheus text format, strictly, into
// "name{label="value",…}" → value (labels sorted by name).
func scrape(t *testing.T, f *fixture, path string) map[string]float64 {
	t.Helper()
	resp, err := f.client.Get(f.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("GET %s: %s, %s", path, resp.Status, resp.Header.Get("Content-Type"))
	}
	families, err := testutil.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: not the text format: %v", path, err)
	}
	out := map[string]float64{}
	for name, fam := range families {
		for _, m := range fam.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(labels)
			key := name
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[key+"_count"] = float64(m.GetHistogram().GetSampleCount())
			default:
				out[key] = m.GetUntyped().GetValue()
			}
		}
	}
	return out
}

func wantSamples(t *testing.T, path string, got map[string]float64, want map[string]float64) {
	t.Helper()
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("GET %s: %s = %v (present %v), want %v", path, k, g, ok, v)
		}
	}
}

// Each metrics path answers the Prometheus text format: /metrics and /metrics/probes
// what the kubelet's gatherers give, /metrics/resource and /metrics/cadvisor the node's
// stats (here the fake runtime's, from the pods' hollow usage) under upstream's names;
// only the API server's kubelet client may scrape them.
func TestMetricsServed(t *testing.T) {
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	cri := fakecri.New()
	cri.SetClock(clk.now)
	runPod(t, cri, "default", "web", map[string]string{hollow.CPUUsageAnnotation: "250m", hollow.MemoryUsageAnnotation: "64Mi"}, "app", "sidecar")
	clk.step(20 * time.Second)

	kubeletMetrics, probeMetrics := prometheus.NewRegistry(), prometheus.NewRegistry()
	nodeName := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kubelet_node_name"}, []string{"node"})
	nodeName.WithLabelValues("node-a").Set(1)
	kubeletMetrics.MustRegister(nodeName)
	probes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "prober_probe_total"}, []string{"probe_type", "result"})
	probes.WithLabelValues("Readiness", "successful").Add(3)
	probeMetrics.MustRegister(probes)
	var running prometheus.Gatherer // nil until "the kubelet runs"
	f := newFixtureWith(t, cri, filepath.Join(t.TempDir(), "pod-logs"), func(c *Config) {
		c.Metrics = func() prometheus.Gatherer { return running }
		c.ProbeMetrics = func() prometheus.Gatherer { return probeMetrics }
	})

	if got := scrape(t, f, "/metrics"); len(got) != 0 {
		t.Errorf("GET /metrics before the kubelet runs: %v, want nothing", got)
	}
	running = kubeletMetrics
	wantSamples(t, "/metrics", scrape(t, f, "/metrics"), map[string]float64{`kubelet_node_name{node="node-a"}`: 1})
	wantSamples(t, "/metrics/probes", scrape(t, f, "/metrics/probes"),
		map[string]float64{`prober_probe_total{probe_type="Readiness",result="successful"}`: 3})

	// 250m for 20 s: 5 core-seconds per container; the node's and the pod's are their sum.
	start := float64(time.Unix(1_700_000_000, 0).Unix())
	resource := scrape(t, f, "/metrics/resource")
	wantSamples(t, "/metrics/resource", resource, map[string]float64{
		"resource_scrape_error":                                                                 0,
		"node_cpu_usage_seconds_total":                                                          10,
		"node_memory_working_set_bytes":                                                         128 << 20,
		`pod_cpu_usage_seconds_total{namespace="default",pod="web"}`:                            10,
		`pod_memory_working_set_bytes{namespace="default",pod="web"}`:                           128 << 20,
		`container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"}`:      5,
		`container_memory_working_set_bytes{container="sidecar",namespace="default",pod="web"}`: 64 << 20,
		`container_start_time_seconds{container="app",namespace="default",pod="web"}`:           start,
	})
	cadvisor := scrape(t, f, "/metrics/cadvisor")
	wantSamples(t, "/metrics/cadvisor", cadvisor, map[string]float64{
		`container_cpu_usage_seconds_total{container="app",cpu="total",namespace="default",pod="web"}`: 5,
		`container_cpu_usage_seconds_total{container="",cpu="total",namespace="default",pod="web"}`:    10,
		`container_memory_working_set_bytes{container="sidecar",namespace="default",pod="web"}`:        64 << 20,
		`container_memory_usage_bytes{container="",namespace="default",pod="web"}`:                     128 << 20,
	})

	other, otherKey := f.ca.issue(t, "someone", false)
	for _, path := range []string{"/metrics", "/metrics/probes", "/metrics/resource", "/metrics/cadvisor"} {
		resp, err := f.httpClient(other, otherKey).Get(f.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s by another client of the CA: %d, want 403", path, resp.StatusCode)
		}
	}
}

// Stats that cannot be read make resource_scrape_error 1 and no other resource metric.
func TestCollectResourceError(t *testing.T) {
	ch := make(chan prometheus.Metric, 10)
	collectResource(nil, errors.New("runtime down"), ch)
	close(ch)
	var got []string
	for m := range ch {
		got = append(got, m.Desc().String())
	}
	if len(got) != 1 || !strings.Contains(got[0], `"resource_scrape_error"`) {
		t.Errorf("metrics = %v, want resource_scrape_error alone", got)
	}
}
