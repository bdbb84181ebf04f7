package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// metricsHandler serves what g gathers in the Prometheus text format (or what the
// scraper negotiates).
func metricsHandler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// gathererHandler serves what the gatherer that get gives at the time of the request
// gathers; nothing while it gives none.
func gathererHandler(get func() prometheus.Gatherer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g := get()
		if g == nil {
			g = prometheus.NewRegistry()
		}
		metricsHandler(g).ServeHTTP(w, r)
	})
}

// summarySource gives the node's Summary (the runtime's CRI stats, or Config.Summary).
type summarySource func(ctx context.Context) (*statsapi.Summary, error)

// summaryMetricsHandler serves the metrics collect makes of the node's summary, read
// once per scrape within the request.
func summaryMetricsHandler(source summarySource, descs []*prometheus.Desc, collect func(s *statsapi.Summary, err error, ch chan<- prometheus.Metric)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reg := prometheus.NewRegistry()
		reg.MustRegister(&summaryCollector{ctx: r.Context(), source: source, descs: descs, collect: collect})
		metricsHandler(reg).ServeHTTP(w, r)
	})
}

type summaryCollector struct {
	ctx     context.Context
	source  summarySource
	descs   []*prometheus.Desc
	collect func(s *statsapi.Summary, err error, ch chan<- prometheus.Metric)
}

func (c *summaryCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *summaryCollector) Collect(ch chan<- prometheus.Metric) {
	s, err := c.source(c.ctx)
	c.collect(s, err, ch)
}

// The resource metrics (/metrics/resource), upstream's names and labels: what the
// metrics pipeline reads of each node, pod and container.
var (
	nodeCPUUsageDesc = prometheus.NewDesc("node_cpu_usage_seconds_total",
		"CPU time the node's pods used, in core-seconds.", nil, nil)
	nodeMemoryWorkingSetDesc = prometheus.NewDesc("node_memory_working_set_bytes",
		"Working set of the node's pods, in bytes.", nil, nil)
	podCPUUsageDesc = prometheus.NewDesc("pod_cpu_usage_seconds_total",
		"CPU time the pod used, in core-seconds.", []string{"pod", "namespace"}, nil)
	podMemoryWorkingSetDesc = prometheus.NewDesc("pod_memory_working_set_bytes",
		"Working set of the pod, in bytes.", []string{"pod", "namespace"}, nil)
	containerCPUUsageDesc = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"CPU time the container used, in core-seconds.", []string{"container", "pod", "namespace"}, nil)
	containerMemoryWorkingSetDesc = prometheus.NewDesc("container_memory_working_set_bytes",
		"Working set of the container, in bytes.", []string{"container", "pod", "namespace"}, nil)
	containerStartTimeDesc = prometheus.NewDesc("container_start_time_seconds",
		"When the container started, in seconds since the epoch.", []string{"container", "pod", "namespace"}, nil)
	resourceScrapeErrorDesc = prometheus.NewDesc("resource_scrape_error",
		"1 when the node's stats could not be read for this scrape, else 0.", nil, nil)
)

var resourceDescs = []*prometheus.Desc{nodeCPUUsageDesc, nodeMemoryWorkingSetDesc, podCPUUsageDesc, podMemoryWorkingSetDesc,
	containerCPUUsageDesc, containerMemoryWorkingSetDesc, containerStartTimeDesc, resourceScrapeErrorDesc}

// collectResource makes the resource metrics of a summary: cumulative CPU in seconds and
// the working set, each stamped with the time of its sample, and each container's start
// time; resource_scrape_error says whether the summary could be read.
func collectResource(s *statsapi.Summary, err error, ch chan<- prometheus.Metric) {
	if err != nil || s == nil {
		ch <- prometheus.MustNewConstMetric(resourceScrapeErrorDesc, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(resourceScrapeErrorDesc, prometheus.GaugeValue, 0)
	cpu(ch, nodeCPUUsageDesc, s.Node.CPU)
	memory(ch, nodeMemoryWorkingSetDesc, s.Node.Memory, memoryWorkingSet)
	for _, p := range s.Pods {
		cpu(ch, podCPUUsageDesc, p.CPU, p.PodRef.Name, p.PodRef.Namespace)
		memory(ch, podMemoryWorkingSetDesc, p.Memory, memoryWorkingSet, p.PodRef.Name, p.PodRef.Namespace)
		for _, c := range p.Containers {
			cpu(ch, containerCPUUsageDesc, c.CPU, c.Name, p.PodRef.Name, p.PodRef.Namespace)
			memory(ch, containerMemoryWorkingSetDesc, c.Memory, memoryWorkingSet, c.Name, p.PodRef.Name, p.PodRef.Namespace)
			if c.StartTime.Unix() > 0 {
				ch <- prometheus.MustNewConstMetric(containerStartTimeDesc, prometheus.GaugeValue,
					float64(c.StartTime.UnixNano())/float64(time.Second), c.Name, p.PodRef.Name, p.PodRef.Namespace)
			}
		}
	}
}

// The cAdvisor metrics (/metrics/cadvisor) the runtime's stats give, cAdvisor's names:
// a series per container, and per pod with container="" (a pod's cgroup, as cAdvisor
// reports it).
var (
	cadvisorLabels           = []string{"container", "pod", "namespace"}
	cadvisorCPUUsageDesc     = prometheus.NewDesc("container_cpu_usage_seconds_total", "Cumulative CPU time used, in seconds.", append([]string{"cpu"}, cadvisorLabels...), nil)
	cadvisorMemoryWorkingSet = prometheus.NewDesc("container_memory_working_set_bytes", "Working set, in bytes.", cadvisorLabels, nil)
	cadvisorMemoryUsageDesc  = prometheus.NewDesc("container_memory_usage_bytes", "Memory used, page cache included, in bytes.", cadvisorLabels, nil)
	cadvisorMemoryRSSDesc    = prometheus.NewDesc("container_memory_rss", "Anonymous and swap cache memory, in bytes.", cadvisorLabels, nil)
	cadvisorStartTimeDesc    = prometheus.NewDesc("container_start_time_seconds", "Start time, in seconds since the epoch.", cadvisorLabels, nil)
	cadvisorDescs            = []*prometheus.Desc{cadvisorCPUUsageDesc, cadvisorMemoryWorkingSet, cadvisorMemoryUsageDesc, cadvisorMemoryRSSDesc, cadvisorStartTimeDesc}
)

// collectCAdvisor makes the cAdvisor metrics of a summary; without one it reports the
// error (the scrape answers what it has, and logs it).
func collectCAdvisor(s *statsapi.Summary, err error, ch chan<- prometheus.Metric) {
	if err != nil || s == nil {
		if err == nil {
			err = errors.New("no summary")
		}
		ch <- prometheus.NewInvalidMetric(cadvisorCPUUsageDesc, fmt.Errorf("read the node's stats: %w", err))
		return
	}
	for _, p := range s.Pods {
		series := func(container string, c *statsapi.CPUStats, m *statsapi.MemoryStats, start time.Time) {
			labels := []string{container, p.PodRef.Name, p.PodRef.Namespace}
			cpu(ch, cadvisorCPUUsageDesc, c, append([]string{"total"}, labels...)...)
			memory(ch, cadvisorMemoryWorkingSet, m, memoryWorkingSet, labels...)
			memory(ch, cadvisorMemoryUsageDesc, m, memoryUsage, labels...)
			memory(ch, cadvisorMemoryRSSDesc, m, memoryRSS, labels...)
			if start.Unix() > 0 {
				ch <- prometheus.MustNewConstMetric(cadvisorStartTimeDesc, prometheus.GaugeValue, float64(start.Unix()), labels...)
			}
		}
		series("", p.CPU, p.Memory, p.StartTime.Time)
		for _, c := range p.Containers {
			series(c.Name, c.CPU, c.Memory, c.StartTime.Time)
		}
	}
}

// cpu sends the cumulative CPU time of a sample, in seconds, stamped with its time.
func cpu(ch chan<- prometheus.Metric, d *prometheus.Desc, s *statsapi.CPUStats, labels ...string) {
	if s == nil || s.UsageCoreNanoSeconds == nil {
		return
	}
	m := prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(*s.UsageCoreNanoSeconds)/float64(time.Second), labels...)
	ch <- prometheus.NewMetricWithTimestamp(s.Time.Time, m)
}

func memoryWorkingSet(s *statsapi.MemoryStats) *uint64 { return s.WorkingSetBytes }
func memoryUsage(s *statsapi.MemoryStats) *uint64      { return s.UsageBytes }
func memoryRSS(s *statsapi.MemoryStats) *uint64        { return s.RSSBytes }

// memory sends one figure of a memory sample, stamped with its time, when the sample has it.
func memory(ch chan<- prometheus.Metric, d *prometheus.Desc, s *statsapi.MemoryStats, field func(*statsapi.MemoryStats) *uint64, labels ...string) {
	if s == nil || field(s) == nil {
		return
	}
	m := prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(*field(s)), labels...)
	ch <- prometheus.NewMetricWithTimestamp(s.Time.Time, m)
}
