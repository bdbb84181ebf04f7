package fakecri

import (
	"context"
	"sort"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelab/kubelab/internal/hollow"
)

// ListContainerStats implements runtimeapi.RuntimeServiceClient: the running containers
// the filter selects, with the usage their annotations declare.
func (f *CRI) ListContainerStats(_ context.Context, in *runtimeapi.ListContainerStatsRequest, _ ...grpc.CallOption) (*runtimeapi.ListContainerStatsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "ListContainerStats")
	f.exitDueLocked()
	flt := in.GetFilter()
	now := f.now()
	var out []*runtimeapi.ContainerStats
	for _, c := range f.containers {
		if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING || (flt.GetId() != "" && flt.GetId() != c.ID) ||
			(flt.GetPodSandboxId() != "" && flt.GetPodSandboxId() != c.SandboxID) || !matches(c.Config.GetLabels(), flt.GetLabelSelector()) {
			continue
		}
		out = append(out, f.containerStatsLocked(c, now))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetAttributes().GetId() < out[j].GetAttributes().GetId() })
	return &runtimeapi.ListContainerStatsResponse{Stats: out}, nil
}

// ListPodSandboxStats implements runtimeapi.RuntimeServiceClient: the ready sandboxes the
// filter selects, each with the sum of its running containers' usage and their stats.
func (f *CRI) ListPodSandboxStats(_ context.Context, in *runtimeapi.ListPodSandboxStatsRequest, _ ...grpc.CallOption) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "ListPodSandboxStats")
	f.exitDueLocked()
	flt := in.GetFilter()
	now := f.now()
	var out []*runtimeapi.PodSandboxStats
	for _, s := range f.sandboxes {
		if s.State != runtimeapi.PodSandboxState_SANDBOX_READY || (flt.GetId() != "" && flt.GetId() != s.ID) ||
			!matches(s.Config.GetLabels(), flt.GetLabelSelector()) {
			continue
		}
		var containers []*runtimeapi.ContainerStats
		var cpuTotal, cpuRate, memory uint64
		for _, c := range f.containers {
			if c.SandboxID != s.ID || c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				continue
			}
			st := f.containerStatsLocked(c, now)
			containers = append(containers, st)
			cpuTotal += st.GetCpu().GetUsageCoreNanoSeconds().GetValue()
			cpuRate += st.GetCpu().GetUsageNanoCores().GetValue()
			memory += st.GetMemory().GetWorkingSetBytes().GetValue()
		}
		sort.Slice(containers, func(i, j int) bool {
			return containers[i].GetAttributes().GetId() < containers[j].GetAttributes().GetId()
		})
		out = append(out, &runtimeapi.PodSandboxStats{
			Attributes: &runtimeapi.PodSandboxAttributes{Id: s.ID, Metadata: s.Config.GetMetadata(),
				Labels: s.Config.GetLabels(), Annotations: s.Config.GetAnnotations()},
			Linux: &runtimeapi.LinuxPodSandboxStats{
				Cpu:        cpuUsage(now, cpuTotal, cpuRate),
				Memory:     memoryUsage(now, memory),
				Containers: containers,
			},
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetAttributes().GetId() < out[j].GetAttributes().GetId() })
	return &runtimeapi.ListPodSandboxStatsResponse{Stats: out}, nil
}

// containerStatsLocked is the stats of a running container at now: its declared CPU rate
// (and that rate times its running time as the cumulative usage) and memory.
func (f *CRI) containerStatsLocked(c *Container, now time.Time) *runtimeapi.ContainerStats {
	annotations := map[string]string{}
	if s, ok := f.sandboxes[c.SandboxID]; ok {
		for k, v := range s.Config.GetAnnotations() {
			annotations[k] = v
		}
	}
	for k, v := range c.Config.GetAnnotations() {
		annotations[k] = v
	}
	rate, memory := hollow.Usage(annotations)
	var total uint64
	if ran := now.Sub(c.StartedAt); ran > 0 {
		total = uint64(float64(rate) * ran.Seconds())
	}
	return &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{Id: c.ID, Metadata: c.Config.GetMetadata(),
			Labels: c.Config.GetLabels(), Annotations: c.Config.GetAnnotations()},
		Cpu:    cpuUsage(now, total, rate),
		Memory: memoryUsage(now, memory),
	}
}

func cpuUsage(now time.Time, total, rate uint64) *runtimeapi.CpuUsage {
	return &runtimeapi.CpuUsage{Timestamp: now.UnixNano(),
		UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: total}, UsageNanoCores: &runtimeapi.UInt64Value{Value: rate}}
}

func memoryUsage(now time.Time, workingSet uint64) *runtimeapi.MemoryUsage {
	return &runtimeapi.MemoryUsage{Timestamp: now.UnixNano(),
		WorkingSetBytes: &runtimeapi.UInt64Value{Value: workingSet}, UsageBytes: &runtimeapi.UInt64Value{Value: workingSet}}
}
