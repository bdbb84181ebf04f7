package kubelet

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/hollow"
)

// HollowSummary is a hollow node's Summary API answer (/stats/summary): each running
// container of the pods this kubelet runs uses what its pod's hollow usage annotations
// say (hollow.Usage), a pod the sum of its containers and the node the sum of its pods.
// A real node's kubelet server reads the runtime's CRI stats instead; HollowSummary
// fails on a real node.
func (k *Kubelet) HollowSummary(context.Context) (*statsapi.Summary, error) {
	if !k.cfg.Hollow {
		return nil, errors.New("kubelet: a real node's summary comes from its runtime's stats")
	}
	pods, err := k.podLister.List(labelsEverything())
	if err != nil {
		return nil, fmt.Errorf("pods of node %s: %w", k.cfg.NodeName, err)
	}
	return hollowSummary(k.cfg.NodeName, pods, time.Now()), nil
}

// hollowSummary is the summary of a hollow node running pods at now: the running
// containers of the running pods, each using what hollow.Usage reads from its pod.
func hollowSummary(node string, pods []*corev1.Pod, now time.Time) *statsapi.Summary {
	at := metav1.NewTime(now)
	summary := &statsapi.Summary{Node: statsapi.NodeStats{NodeName: node}}
	var nodeCPU, nodeMemory uint64
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		ps := statsapi.PodStats{PodRef: statsapi.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)}}
		var podCPU, podMemory uint64
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Running == nil {
				continue
			}
			cpu, memory := hollow.Usage(p.Annotations)
			podCPU, podMemory = podCPU+cpu, podMemory+memory
			ps.Containers = append(ps.Containers, statsapi.ContainerStats{Name: c.Name, StartTime: c.State.Running.StartedAt,
				CPU: cpuStats(at, cpu), Memory: memoryStats(at, memory)})
		}
		ps.CPU, ps.Memory = cpuStats(at, podCPU), memoryStats(at, podMemory)
		nodeCPU, nodeMemory = nodeCPU+podCPU, nodeMemory+podMemory
		summary.Pods = append(summary.Pods, ps)
	}
	summary.Node.CPU, summary.Node.Memory = cpuStats(at, nodeCPU), memoryStats(at, nodeMemory)
	return summary
}

func cpuStats(at metav1.Time, nanoCores uint64) *statsapi.CPUStats {
	return &statsapi.CPUStats{Time: at, UsageNanoCores: ptr.To(nanoCores)}
}

func memoryStats(at metav1.Time, workingSet uint64) *statsapi.MemoryStats {
	return &statsapi.MemoryStats{Time: at, WorkingSetBytes: ptr.To(workingSet)}
}
