package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The label the node's runtime puts on sandboxes and containers naming the pod's
// namespace (with labelPodUID and labelContainerName).
const (
	labelPodName      = "io.kubernetes.pod.name"
	labelPodNamespace = "io.kubernetes.pod.namespace"
)

// statsProvider answers /stats/summary from the runtime's CRI stats. CPU usage rates the
// runtime does not report (usageNanoCores) are computed from the cumulative usage of two
// successive samples of the same container or sandbox.
type statsProvider struct {
	runtime runtimeapi.RuntimeServiceClient
	node    string
	started time.Time
	now     func() time.Time

	mu sync.Mutex
	// cpu is the last CPU sample of each container and sandbox, by CRI id.
	cpu map[string]cpuSample

	// base and interval are the server's lifetime and the sampling period; sampling
	// starts with the first request (once) and ends with base.
	base     context.Context
	interval time.Duration
	start    sync.Once
	sampling sync.WaitGroup
}

// cpuSample is one cumulative CPU reading and the rate it gave.
type cpuSample struct {
	timestamp int64  // ns
	total     uint64 // core-nanoseconds
	rate      *uint64
}

func newStatsProvider(runtime runtimeapi.RuntimeServiceClient, node string, now func() time.Time) *statsProvider {
	return &statsProvider{runtime: runtime, node: node, started: now(), now: now, cpu: map[string]cpuSample{}}
}

// sampleWhileAsked makes the first request start sampling the runtime's stats every
// interval until ctx ends, so that CPU rates (the runtime's, or the kubelet's from two
// samples) span at most about an interval, as upstream's kubelet keeps its stats fresh.
func (p *statsProvider) sampleWhileAsked(ctx context.Context, interval time.Duration) {
	p.base, p.interval = ctx, interval
}

// wait waits for the sampling to end.
func (p *statsProvider) wait() { p.sampling.Wait() }

func (p *statsProvider) startSampling() {
	p.start.Do(func() {
		if p.base == nil || p.interval <= 0 {
			return
		}
		p.sampling.Add(1)
		go func() {
			defer p.sampling.Done()
			t := time.NewTicker(p.interval)
			defer t.Stop()
			for {
				select {
				case <-p.base.Done():
					return
				case <-t.C:
					ctx, cancel := context.WithTimeout(p.base, p.interval)
					_, _ = p.summary(ctx)
					cancel()
				}
			}
		}()
	})
}

// ServeHTTP answers GET /stats/summary (?only_cpu_and_memory is accepted: the summary
// only ever holds CPU and memory).
func (p *statsProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.startSampling()
	summary, err := p.summary(r.Context())
	if err != nil {
		writeStatus(w, fmt.Errorf("get summary stats: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(summary)
}

// summaryFunc answers GET /stats/summary from a summary the node makes itself
// (Config.Summary).
type summaryFunc func(ctx context.Context) (*statsapi.Summary, error)

func (f summaryFunc) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	summary, err := f(r.Context())
	if err != nil {
		writeStatus(w, fmt.Errorf("get summary stats: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(summary)
}

// criStats is what one summary is made from.
type criStats struct {
	sandboxes      []*runtimeapi.PodSandbox
	containers     []*runtimeapi.Container
	containerStats []*runtimeapi.ContainerStats
	// sandboxStats is nil when the runtime does not implement ListPodSandboxStats.
	sandboxStats []*runtimeapi.PodSandboxStats
}

// summary lists the ready sandboxes and running containers with their stats.
func (p *statsProvider) summary(ctx context.Context) (*statsapi.Summary, error) {
	var in criStats
	sbs, err := p.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}})
	if err != nil {
		return nil, fmt.Errorf("list pod sandboxes: %w", err)
	}
	in.sandboxes = sbs.GetItems()
	cs, err := p.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	in.containers = cs.GetContainers()
	cstats, err := p.runtime.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: &runtimeapi.ContainerStatsFilter{}})
	if err != nil {
		return nil, fmt.Errorf("list container stats: %w", err)
	}
	in.containerStats = cstats.GetStats()
	sbstats, err := p.runtime.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{Filter: &runtimeapi.PodSandboxStatsFilter{}})
	switch {
	case status.Code(err) == codes.Unimplemented:
	case err != nil:
		return nil, fmt.Errorf("list pod sandbox stats: %w", err)
	default:
		in.sandboxStats = sbstats.GetStats()
		if in.sandboxStats == nil {
			in.sandboxStats = []*runtimeapi.PodSandboxStats{}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s := buildSummary(p.node, p.started, p.now(), in, p.rateLocked)
	p.forgetLocked(in)
	return s, nil
}

// rateLocked is the CPU usage rate (nanocores) of a sample: the runtime's, else the
// change of the cumulative usage since the previous sample of the same id (nil for the
// first sample, or after the counter went back).
func (p *statsProvider) rateLocked(id string, cpu *runtimeapi.CpuUsage) *uint64 {
	if cpu == nil {
		return nil
	}
	if cpu.GetUsageNanoCores() != nil {
		v := cpu.GetUsageNanoCores().GetValue()
		return &v
	}
	if cpu.GetUsageCoreNanoSeconds() == nil {
		return nil
	}
	cur := cpuSample{timestamp: cpu.GetTimestamp(), total: cpu.GetUsageCoreNanoSeconds().GetValue()}
	cur.rate = cpuRate(p.cpu[id], cur)
	p.cpu[id] = cur
	return cur.rate
}

// cpuRate is the rate between two cumulative samples; the same sample read twice keeps
// the rate it had.
func cpuRate(prev, cur cpuSample) *uint64 {
	switch {
	case prev.timestamp == 0 || cur.total < prev.total || cur.timestamp < prev.timestamp:
		return nil
	case cur.timestamp == prev.timestamp:
		return prev.rate
	}
	r := uint64(float64(cur.total-prev.total) / float64(cur.timestamp-prev.timestamp) * 1e9)
	return &r
}

// forgetLocked drops the CPU samples of containers and sandboxes that are gone.
func (p *statsProvider) forgetLocked(in criStats) {
	seen := map[string]bool{}
	for _, s := range in.containerStats {
		seen[s.GetAttributes().GetId()] = true
	}
	for _, s := range in.sandboxStats {
		seen[s.GetAttributes().GetId()] = true
	}
	for id := range p.cpu {
		if !seen[id] {
			delete(p.cpu, id)
		}
	}
}

// buildSummary is the Summary of a node's CRI stats: a pod per ready sandbox with its
// running containers' CPU and memory; the pod's own figures are the sandbox's stats when
// the runtime gives them, else the sum of its containers'; the node's are the sum of its
// pods'.
func buildSummary(node string, start, now time.Time, in criStats, rate func(string, *runtimeapi.CpuUsage) *uint64) *statsapi.Summary {
	running := make(map[string]*runtimeapi.Container, len(in.containers))
	for _, c := range in.containers {
		running[c.GetId()] = c
	}
	// Container stats by sandbox: ListContainerStats does not name the sandbox, the
	// container list does.
	bySandbox := map[string][]statsapi.ContainerStats{}
	for _, st := range in.containerStats {
		c, ok := running[st.GetAttributes().GetId()]
		if !ok {
			continue
		}
		cs := statsapi.ContainerStats{
			Name:      c.GetMetadata().GetName(),
			StartTime: metav1.NewTime(time.Unix(0, c.GetCreatedAt())),
			CPU:       cpuStats(st.GetCpu(), rate(c.GetId(), st.GetCpu()), now),
			Memory:    memoryStats(st.GetMemory(), now),
		}
		bySandbox[c.GetPodSandboxId()] = append(bySandbox[c.GetPodSandboxId()], cs)
	}
	podStats := map[string]*runtimeapi.PodSandboxStats{}
	for _, st := range in.sandboxStats {
		podStats[st.GetAttributes().GetId()] = st
	}

	summary := &statsapi.Summary{Node: statsapi.NodeStats{NodeName: node, StartTime: metav1.NewTime(start)}, Pods: []statsapi.PodStats{}}
	var nodeCPU, nodeRate, nodeMemory uint64
	nodeHasRate := true
	for _, sb := range in.sandboxes {
		m := sb.GetMetadata()
		ps := statsapi.PodStats{
			PodRef:     statsapi.PodReference{Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUid()},
			StartTime:  metav1.NewTime(time.Unix(0, sb.GetCreatedAt())),
			Containers: bySandbox[sb.GetId()],
		}
		if ps.PodRef.Name == "" {
			ps.PodRef.Name, ps.PodRef.Namespace = sb.GetLabels()[labelPodName], sb.GetLabels()[labelPodNamespace]
		}
		if ps.PodRef.UID == "" {
			ps.PodRef.UID = sb.GetLabels()[labelPodUID]
		}
		if ps.Containers == nil {
			ps.Containers = []statsapi.ContainerStats{}
		}
		sort.Slice(ps.Containers, func(i, j int) bool { return ps.Containers[i].Name < ps.Containers[j].Name })
		if st, ok := podStats[sb.GetId()]; ok && st.GetLinux().GetCpu() != nil && st.GetLinux().GetMemory() != nil {
			ps.CPU = cpuStats(st.GetLinux().GetCpu(), rate(sb.GetId(), st.GetLinux().GetCpu()), now)
			ps.Memory = memoryStats(st.GetLinux().GetMemory(), now)
		} else {
			ps.CPU, ps.Memory = sumContainers(ps.Containers, now)
		}
		nodeCPU += value(ps.CPU.UsageCoreNanoSeconds)
		nodeMemory += value(ps.Memory.WorkingSetBytes)
		if ps.CPU.UsageNanoCores == nil {
			nodeHasRate = false
		}
		nodeRate += value(ps.CPU.UsageNanoCores)
		summary.Pods = append(summary.Pods, ps)
	}
	sort.Slice(summary.Pods, func(i, j int) bool {
		a, b := summary.Pods[i].PodRef, summary.Pods[j].PodRef
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	summary.Node.CPU = &statsapi.CPUStats{Time: metav1.NewTime(now), UsageCoreNanoSeconds: &nodeCPU}
	if nodeHasRate {
		summary.Node.CPU.UsageNanoCores = &nodeRate
	}
	summary.Node.Memory = &statsapi.MemoryStats{Time: metav1.NewTime(now), WorkingSetBytes: &nodeMemory, UsageBytes: ptrTo(nodeMemory)}
	return summary
}

// sumContainers adds up the CPU and memory of a pod's containers; the pod has a CPU rate
// when every container has one.
func sumContainers(cs []statsapi.ContainerStats, now time.Time) (*statsapi.CPUStats, *statsapi.MemoryStats) {
	var total, rate, memory uint64
	hasRate := true
	for _, c := range cs {
		total += value(c.CPU.UsageCoreNanoSeconds)
		memory += value(c.Memory.WorkingSetBytes)
		if c.CPU.UsageNanoCores == nil {
			hasRate = false
		}
		rate += value(c.CPU.UsageNanoCores)
	}
	cpu := &statsapi.CPUStats{Time: metav1.NewTime(now), UsageCoreNanoSeconds: &total}
	if hasRate {
		cpu.UsageNanoCores = &rate
	}
	return cpu, &statsapi.MemoryStats{Time: metav1.NewTime(now), WorkingSetBytes: &memory, UsageBytes: ptrTo(memory)}
}

// cpuStats converts a CRI CPU sample (stamped now when the runtime did not).
func cpuStats(cpu *runtimeapi.CpuUsage, rate *uint64, now time.Time) *statsapi.CPUStats {
	out := &statsapi.CPUStats{Time: stamp(cpu.GetTimestamp(), now), UsageNanoCores: rate}
	if v := cpu.GetUsageCoreNanoSeconds(); v != nil {
		out.UsageCoreNanoSeconds = ptrTo(v.GetValue())
	}
	return out
}

// memoryStats converts a CRI memory sample.
func memoryStats(mem *runtimeapi.MemoryUsage, now time.Time) *statsapi.MemoryStats {
	out := &statsapi.MemoryStats{Time: stamp(mem.GetTimestamp(), now)}
	for _, f := range []struct {
		from *runtimeapi.UInt64Value
		to   **uint64
	}{
		{mem.GetWorkingSetBytes(), &out.WorkingSetBytes}, {mem.GetUsageBytes(), &out.UsageBytes},
		{mem.GetAvailableBytes(), &out.AvailableBytes}, {mem.GetRssBytes(), &out.RSSBytes},
		{mem.GetPageFaults(), &out.PageFaults}, {mem.GetMajorPageFaults(), &out.MajorPageFaults},
	} {
		if f.from != nil {
			*f.to = ptrTo(f.from.GetValue())
		}
	}
	return out
}

func stamp(ns int64, now time.Time) metav1.Time {
	if ns == 0 {
		return metav1.NewTime(now)
	}
	return metav1.NewTime(time.Unix(0, ns))
}

func value(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

func ptrTo(v uint64) *uint64 { return &v }
