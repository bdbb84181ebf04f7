package kuberuntime

import (
	"context"
	"fmt"
	"log/slog"
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelab/kubelab/internal/kubelet"
)

// resizeAction gives a running instance its container's new resources in place (CRI
// UpdateContainerResources).
type resizeAction struct {
	inst      instance
	container *corev1.Container
}

// specResources are the values of a container's resources a resize compares, as
// upstream's kubelet does: requests and limits of cpu (milli) and memory (bytes).
type specResources struct{ cpuRequest, cpuLimit, memRequest, memLimit int64 }

func specResourcesOf(r *corev1.ResourceRequirements) specResources {
	return specResources{cpuRequest: r.Requests.Cpu().MilliValue(), cpuLimit: r.Limits.Cpu().MilliValue(),
		memRequest: r.Requests.Memory().Value(), memLimit: r.Limits.Memory().Value()}
}

// resizeOf decides what a running instance needs for it to run with c's resources (the
// ones the kubelet allocated): nothing, an update in place, or a restart, when a resource
// that changes has the resize policy RestartContainer (without a policy a resource is
// NotRequired). It compares c's resources with those last applied to the instance
// (in.actuated); when the runtime does not know them (a restarted kubelet) it compares
// the cgroup settings c asks for with those the runtime reports, and an unknown or
// different setting is updated in place, never restarted for.
func resizeOf(pod *corev1.Pod, c *corev1.Container, in *instance) (update, restart bool) {
	if in.actuated == nil {
		want := linuxResources(pod, c, 0)
		return in.resources == nil || !sameCgroup(want, in.resources), false
	}
	want, have := specResourcesOf(&c.Resources), specResourcesOf(in.actuated)
	if want == have {
		return false, false
	}
	restarts := func(name corev1.ResourceName) bool {
		for _, p := range c.ResizePolicy {
			if p.ResourceName == name {
				return p.RestartPolicy == corev1.RestartContainer
			}
		}
		return false
	}
	if (want.cpuRequest != have.cpuRequest || want.cpuLimit != have.cpuLimit) && restarts(corev1.ResourceCPU) ||
		(want.memRequest != have.memRequest || want.memLimit != have.memLimit) && restarts(corev1.ResourceMemory) {
		return false, true
	}
	return true, false
}

// sameCgroup says whether the cgroup settings a and b agree on cpu shares, CFS quota
// (none when not positive) and memory limit (none when 0).
func sameCgroup(a, b *runtimeapi.LinuxContainerResources) bool {
	quota := func(r *runtimeapi.LinuxContainerResources) (int64, int64) {
		if r.GetCpuQuota() <= 0 || r.GetCpuPeriod() <= 0 {
			return 0, 0
		}
		return r.GetCpuQuota(), r.GetCpuPeriod()
	}
	aq, ap := quota(a)
	bq, bp := quota(b)
	return a.GetCpuShares() == b.GetCpuShares() && aq == bq && ap == bp && a.GetMemoryLimitInBytes() == b.GetMemoryLimitInBytes()
}

// resizeMessage is the Killing event's message of a container restarted for its resize.
func resizeMessage(c *corev1.Container) string {
	return fmt.Sprintf("Container %s resize requires restart", c.Name)
}

// resize applies a container's resources to its running instance and records them as
// the instance's.
func (r *Runtime) resize(ctx context.Context, pod *corev1.Pod, a resizeAction, log *slog.Logger) error {
	res := linuxResources(pod, a.container, r.cfg.Allocatable.Memory().Value())
	_, err := r.rs.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: a.inst.id, Linux: res})
	if err != nil {
		return &kubelet.ResizeError{Container: a.container.Name, Message: grpcMessage(err)}
	}
	r.setActuated(pod.UID, a.container.Name, a.inst.id, a.container.Resources, res)
	log.Info("resized container", "container", a.container.Name, "id", a.inst.id,
		"cpuShares", res.GetCpuShares(), "cpuQuota", res.GetCpuQuota(), "memoryLimit", res.GetMemoryLimitInBytes())
	return nil
}

// adoptActuated records, for the running instances whose applied resources the runtime
// does not know (it restarted) and that need no resize, their container's resources as
// applied: their cgroup settings are the spec's.
func (r *Runtime) adoptActuated(pod *corev1.Pod, v *podView, a podActions) {
	acted := map[string]bool{}
	for _, rs := range a.resize {
		acted[rs.inst.id] = true
	}
	for _, k := range a.kill {
		acted[k.inst.id] = true
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			in := v.latest(c.Name)
			if in == nil || in.actuated != nil || in.resources == nil || acted[in.id] || in.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
				continue
			}
			r.setActuated(pod.UID, c.Name, in.id, c.Resources, in.resources)
		}
	}
}

// actuation is what the runtime last applied to a container's instance: the resources
// of its spec and the cgroup settings they made.
type actuation struct {
	id        string
	resources corev1.ResourceRequirements
	linux     *runtimeapi.LinuxContainerResources
}

// setActuated records what was applied to the instance id of the pod's container.
func (r *Runtime) setActuated(uid types.UID, name, id string, res corev1.ResourceRequirements, linux *runtimeapi.LinuxContainerResources) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.actuated[uid] == nil {
		r.actuated[uid] = map[string]actuation{}
	}
	r.actuated[uid][name] = actuation{id: id, resources: *res.DeepCopy(), linux: linux}
}

// withActuated sets, on the view's instances, what the runtime applied to them.
func (r *Runtime) withActuated(uid types.UID, v *podView) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, a := range r.actuated[uid] {
		for i := range v.containers[name] {
			if in := &v.containers[name][i]; in.id == a.id {
				res := a.resources
				in.actuated = &res
				if in.resources == nil {
					in.resources = a.linux
				}
			}
		}
	}
}

// Cgroup settings read back as quantities, as upstream's kubelet converts them.
const (
	milliCPUToCPU = 1000
	// minMilliCPULimit is the smallest cpu limit a CFS quota expresses (minQuota).
	minMilliCPULimit = minQuota * milliCPUToCPU / quotaPeriod
)

// containerResources are the cgroup settings of an instance as quantities: the cpu
// request from the shares, the cpu limit from the quota and period, the memory limit;
// nil when none is set.
func containerResources(res *runtimeapi.LinuxContainerResources) *kubelet.ContainerResources {
	if res == nil {
		return nil
	}
	var out kubelet.ContainerResources
	if res.GetCpuPeriod() > 0 && res.GetCpuQuota() > 0 {
		if m := res.GetCpuQuota() * milliCPUToCPU / res.GetCpuPeriod(); m > 0 {
			out.CPULimit = resource.NewMilliQuantity(m, resource.DecimalSI)
		}
	}
	if s := res.GetCpuShares(); s >= minShares {
		m := int64(math.Ceil(float64(s*milliCPUToCPU) / float64(sharesPerCPU)))
		out.CPURequest = resource.NewMilliQuantity(m, resource.DecimalSI)
	}
	if m := res.GetMemoryLimitInBytes(); m > 0 {
		out.MemoryLimit = resource.NewQuantity(m, resource.BinarySI)
	}
	if out.CPULimit == nil && out.CPURequest == nil && out.MemoryLimit == nil {
		return nil
	}
	return &out
}
