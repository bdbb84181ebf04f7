package kuberuntime

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelab/kubelab/internal/kubelet"
)

// res is a ResourceRequirements of cpu and memory requests and limits ("" leaves one out).
func res(cpuReq, cpuLim, memReq, memLim string) corev1.ResourceRequirements {
	var r corev1.ResourceRequirements
	set := func(l *corev1.ResourceList, name corev1.ResourceName, q string) {
		if q == "" {
			return
		}
		if *l == nil {
			*l = corev1.ResourceList{}
		}
		(*l)[name] = resource.MustParse(q)
	}
	set(&r.Requests, corev1.ResourceCPU, cpuReq)
	set(&r.Limits, corev1.ResourceCPU, cpuLim)
	set(&r.Requests, corev1.ResourceMemory, memReq)
	set(&r.Limits, corev1.ResourceMemory, memLim)
	return r
}

func policy(cpu, mem corev1.ResourceResizeRestartPolicy) []corev1.ContainerResizePolicy {
	var out []corev1.ContainerResizePolicy
	if cpu != "" {
		out = append(out, corev1.ContainerResizePolicy{ResourceName: corev1.ResourceCPU, RestartPolicy: cpu})
	}
	if mem != "" {
		out = append(out, corev1.ContainerResizePolicy{ResourceName: corev1.ResourceMemory, RestartPolicy: mem})
	}
	return out
}

// TestResizeOf: a running instance is updated in place when its container's resources
// differ from those applied to it, restarted when a resource that changes says
// RestartContainer; when what was applied is not known, the cgroup settings the runtime
// reports decide, and a difference is never a restart.
func TestResizeOf(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways, nil, "app")
	applied := res("20m", "30m", "35Mi", "45Mi")
	for _, tc := range []struct {
		name            string
		want            corev1.ResourceRequirements
		policy          []corev1.ContainerResizePolicy
		actuated        *corev1.ResourceRequirements
		reported        *runtimeapi.LinuxContainerResources
		update, restart bool
	}{
		{name: "unchanged", want: applied, actuated: &applied},
		{name: "cpu up", want: res("25m", "35m", "35Mi", "45Mi"), actuated: &applied, update: true},
		{name: "equivalent cpu (same cgroup, other spec)", want: res("19m", "30m", "35Mi", "45Mi"), actuated: &applied, update: true},
		{name: "memory request alone", want: res("20m", "30m", "40Mi", "45Mi"), actuated: &applied, update: true},
		{name: "memory with RestartContainer", want: res("20m", "30m", "35Mi", "50Mi"), actuated: &applied,
			policy: policy(corev1.NotRequired, corev1.RestartContainer), restart: true},
		{name: "cpu with memory's RestartContainer", want: res("25m", "30m", "35Mi", "45Mi"), actuated: &applied,
			policy: policy(corev1.NotRequired, corev1.RestartContainer), update: true},
		{name: "cpu with RestartContainer", want: res("25m", "30m", "35Mi", "45Mi"), actuated: &applied,
			policy: policy(corev1.RestartContainer, ""), restart: true},
		{name: "unknown, cgroup as the spec says", want: applied,
			reported: &runtimeapi.LinuxContainerResources{CpuShares: 20, CpuQuota: 3000, CpuPeriod: 100000, MemoryLimitInBytes: 45 << 20}},
		{name: "unknown, cgroup differs: in place even with RestartContainer", want: applied, policy: policy(corev1.RestartContainer, corev1.RestartContainer),
			reported: &runtimeapi.LinuxContainerResources{CpuShares: 20, CpuQuota: 2000, CpuPeriod: 100000, MemoryLimitInBytes: 45 << 20}, update: true},
		{name: "unknown, not reported", want: applied, update: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pod.DeepCopy()
			c := &p.Spec.Containers[0]
			c.Resources, c.ResizePolicy = tc.want, tc.policy
			in := inst("app", 0, running, 0)
			in.actuated, in.resources = tc.actuated, tc.reported
			if update, restart := resizeOf(p, c, &in); update != tc.update || restart != tc.restart {
				t.Errorf("update %v restart %v, want %v %v", update, restart, tc.update, tc.restart)
			}
		})
	}
}

// TestContainerResources: cgroup settings read back as upstream's kubelet reads them.
func TestContainerResources(t *testing.T) {
	for _, tc := range []struct {
		in           *runtimeapi.LinuxContainerResources
		req, lim, mm string // "" when nil
	}{
		{in: &runtimeapi.LinuxContainerResources{CpuShares: 20, CpuQuota: 3500, CpuPeriod: 100000, MemoryLimitInBytes: 50 << 20},
			req: "20m", lim: "35m", mm: "50Mi"},
		{in: &runtimeapi.LinuxContainerResources{CpuShares: 340}, req: "333m"},
		{in: &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuQuota: 1000, CpuPeriod: 100000}, req: "2m", lim: "10m"},
		{in: &runtimeapi.LinuxContainerResources{CpuShares: 1024, CpuQuota: -1, CpuPeriod: 100000}, req: "1"},
		{in: &runtimeapi.LinuxContainerResources{}},
		{},
	} {
		got := containerResources(tc.in)
		str := func(q *resource.Quantity) string {
			if q == nil {
				return ""
			}
			return q.String()
		}
		var req, lim, mm string
		if got != nil {
			req, lim, mm = str(got.CPURequest), str(got.CPULimit), str(got.MemoryLimit)
		}
		if req != tc.req || lim != tc.lim || mm != tc.mm || (got == nil) != (tc.req == "" && tc.lim == "" && tc.mm == "") {
			t.Errorf("%v: %q %q %q, want %q %q %q", tc.in, req, lim, mm, tc.req, tc.lim, tc.mm)
		}
	}
}

// TestComputePodActionsResize: a running app container or sidecar whose resources changed
// is resized in place, or killed and started again (at once) when its policy says so; a
// running init container is resized in place.
func TestComputePodActionsResize(t *testing.T) {
	old := res("20m", "", "35Mi", "")
	pod := testPod(corev1.RestartPolicyAlways, []string{"side"}, "app", "restarts")
	for _, name := range []string{"side", "app", "restarts"} {
		spec(pod, name).Resources = res("25m", "", "35Mi", "")
	}
	spec(pod, "restarts").ResizePolicy = policy(corev1.RestartContainer, "")
	ins := []instance{inst("side", 0, running, 0), inst("app", 0, running, 0), inst("restarts", 2, running, 0)}
	for i := range ins {
		ins[i].actuated = &old
	}
	a := computePodActions(pod, viewOf{pod: pod, insts: ins}.build())
	var resized []string
	for _, r := range a.resize {
		resized = append(resized, r.inst.name)
	}
	s := summarize(a)
	if !slices.Equal(resized, []string{"side", "app"}) || !slices.Equal(s.kill, []string{"restarts"}) ||
		!slices.Equal(s.start, []string{"restarts@3!"}) || len(s.startInit) != 0 || s.killPod {
		t.Errorf("resized %v, actions %+v", resized, s)
	}
	if a.kill[0].message != "Container restarts resize requires restart" {
		t.Errorf("kill message %q", a.kill[0].message)
	}

	initializing := testPod(corev1.RestartPolicyAlways, []string{"init"}, "app")
	spec(initializing, "init").Resources = res("25m", "", "", "")
	in := inst("init", 0, running, 0)
	in.actuated = &old
	a = computePodActions(initializing, viewOf{pod: initializing, insts: []instance{in}}.build())
	if len(a.resize) != 1 || a.resize[0].inst.name != "init" || len(a.kill) != 0 || len(a.start) != 0 {
		t.Errorf("running init container: %+v", summarize(a))
	}
}

// TestSyncPodResize: SyncPod applies new resources to a running container in place (CRI
// UpdateContainerResources, without a restart) and reports them; a container whose resize
// policy says RestartContainer is restarted with them; a failed update is a ResizeError;
// a runtime that reports no resources has those applied reported; and a new Runtime (a
// restarted kubelet) takes the running containers as they are.
func TestSyncPodResize(t *testing.T) {
	r, env := newTestRuntime(t)
	ctx := context.Background()
	pod := testPod(corev1.RestartPolicyAlways, nil, "app", "restarts")
	spec(pod, "app").Resources = res("20m", "30m", "35Mi", "45Mi")
	spec(pod, "restarts").Resources = res("20m", "", "35Mi", "45Mi")
	spec(pod, "restarts").ResizePolicy = policy(corev1.NotRequired, corev1.RestartContainer)
	if _, err := r.SyncPod(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	app, restarts := env.newest("app"), env.newest("restarts")

	pod.Spec.Containers[0].Resources = res("25m", "35m", "35Mi", "50Mi")
	pod.Spec.Containers[1].Resources = res("20m", "", "35Mi", "50Mi")
	env.events()
	st, err := r.SyncPod(ctx, pod, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := env.newest("app")
	if got.ID != app.ID || got.Config.GetLinux().GetResources().GetCpuQuota() != 3500 ||
		got.Config.GetLinux().GetResources().GetCpuShares() != 25 || got.Config.GetLinux().GetResources().GetMemoryLimitInBytes() != 50<<20 {
		t.Errorf("app after the resize: id %s (was %s), resources %v", got.ID, app.ID, got.Config.GetLinux().GetResources())
	}
	s := stateOf(t, st, "app")
	if s.RestartCount != 0 || s.Resources == nil || s.Resources.CPULimit.String() != "35m" || s.Resources.CPURequest.String() != "25m" ||
		s.Resources.MemoryLimit.String() != "50Mi" || s.Actuated == nil || s.Actuated.Limits.Cpu().String() != "35m" {
		t.Errorf("app state %+v, resources %+v", s, s.Resources)
	}
	rs := stateOf(t, st, "restarts")
	if n := env.newest("restarts"); rs.RestartCount != 1 || n.ID == restarts.ID || n.Config.GetLinux().GetResources().GetMemoryLimitInBytes() != 50<<20 {
		t.Errorf("restarted container: restart count %d, id %s (was %s), resources %v", rs.RestartCount, n.ID, restarts.ID, n.Config.GetLinux().GetResources())
	}
	if evs := env.events(); !hasEvent(evs, "Normal Killing Container restarts resize requires restart") {
		t.Errorf("events %q", evs)
	}
	calls := func() int {
		n := 0
		for _, c := range env.cri.Calls() {
			if c == "UpdateContainerResources" {
				n++
			}
		}
		return n
	}
	if n := calls(); n != 1 {
		t.Errorf("%d UpdateContainerResources calls, want 1 (the restarted container starts with its resources)", n)
	}
	if _, err := r.SyncPod(ctx, pod, nil); err != nil || calls() != 1 {
		t.Errorf("a sync without a change: %v, %d updates", err, calls())
	}

	// The runtime refuses the update: a ResizeError, the old resources still reported.
	env.cri.FailUpdates(status.Error(codes.Unknown, "failed to set memory limit: device or resource busy"))
	pod.Spec.Containers[0].Resources = res("25m", "35m", "35Mi", "40Mi")
	st, err = r.SyncPod(ctx, pod, nil)
	var re *kubelet.ResizeError
	if !errors.As(err, &re) || re.Container != "app" || re.Message != "failed to set memory limit: device or resource busy" {
		t.Errorf("failed update: %v", err)
	}
	if s := stateOf(t, st, "app"); s.Actuated.Limits.Memory().String() != "50Mi" || s.Resources.MemoryLimit.String() != "50Mi" {
		t.Errorf("after a failed update: actuated %v, resources %+v", s.Actuated.Limits, s.Resources)
	}
	env.cri.FailUpdates(nil)

	// A runtime that does not report resources: what was applied is.
	env.cri.HideResources(true)
	st, err = r.SyncPod(ctx, pod, nil)
	if s := stateOf(t, st, "app"); err != nil || s.Resources == nil || s.Resources.MemoryLimit.String() != "40Mi" {
		t.Errorf("applied resources reported: %v, %+v", err, s.Resources)
	}
	env.cri.HideResources(false)

	// A new Runtime over the same containers does nothing to them.
	fresh, err := New(r.cfg, env.cri, env.cri)
	if err != nil {
		t.Fatal(err)
	}
	fresh.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	before := calls()
	st, err = fresh.SyncPod(ctx, pod, nil)
	if s := stateOf(t, st, "app"); err != nil || calls() != before || s.RestartCount != 0 || s.Actuated == nil {
		t.Errorf("restarted kubelet: %v, %d updates (was %d), state %+v", err, calls(), before, s)
	}
}
