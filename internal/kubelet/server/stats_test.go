package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/kubelab/kubelab/internal/hollow"
	"github.com/kubelab/kubelab/internal/kubelet/kuberuntime/fakecri"
	"github.com/kubelab/kubelab/internal/testutil"
)

// clock is a settable time for the fake runtime.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// runPod starts a pod on the fake runtime as the kubelet's runtime does: a sandbox
// carrying the pod's annotations and labels naming it, and running containers.
func runPod(t *testing.T, cri *fakecri.CRI, ns, name string, ann map[string]string, containers ...string) (sandbox string, ids []string) {
	t.Helper()
	ctx := context.Background()
	uid := "uid-" + name
	labels := map[string]string{labelPodName: name, labelPodNamespace: ns, labelPodUID: uid}
	cfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: ns, Uid: uid},
		Labels: labels, Annotations: ann}
	sb, err := cri.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	cri.AddImage("busybox")
	for _, c := range containers {
		cl := map[string]string{labelContainerName: c}
		for k, v := range labels {
			cl[k] = v
		}
		resp, err := cri.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, SandboxConfig: cfg,
			Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: c}, Image: &runtimeapi.ImageSpec{Image: "busybox"}, Labels: cl}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cri.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: resp.ContainerId}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.ContainerId)
	}
	return sb.PodSandboxId, ids
}

// getSummary asks the handler for the summary.
func getSummary(t *testing.T, h http.Handler) *statsapi.Summary {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/stats/summary", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /stats/summary: %d %s", rec.Code, rec.Body)
	}
	var s statsapi.Summary
	if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

func u64(p *uint64) int64 {
	if p == nil {
		return -1
	}
	return int64(*p)
}

// The summary reports the hollow usage the pods' annotations declare, per container, per
// pod and for the node; exited containers and dead sandboxes are left out.
func TestStatsSummary(t *testing.T) {
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	cri := fakecri.New()
	cri.SetClock(clk.now)
	runPod(t, cri, "default", "web", map[string]string{hollow.CPUUsageAnnotation: "250m", hollow.MemoryUsageAnnotation: "64Mi"}, "app", "sidecar")
	_, idle := runPod(t, cri, "default", "idle", nil, "app", "done")
	dead, _ := runPod(t, cri, "other", "dead", map[string]string{hollow.CPUUsageAnnotation: "1"}, "app")
	if err := cri.Exit(idle[1], 0); err != nil {
		t.Fatal(err)
	}
	if err := cri.SandboxDied(dead); err != nil {
		t.Fatal(err)
	}
	clk.step(20 * time.Second)

	s := getSummary(t, newStatsProvider(cri, "node-a", clk.now))
	if s.Node.NodeName != "node-a" || len(s.Pods) != 2 {
		t.Fatalf("summary: node %q, %d pods: %+v", s.Node.NodeName, len(s.Pods), s.Pods)
	}
	idlePod, web := s.Pods[0], s.Pods[1]
	if web.PodRef != (statsapi.PodReference{Namespace: "default", Name: "web", UID: "uid-web"}) || len(web.Containers) != 2 {
		t.Fatalf("web pod: %+v", web)
	}
	for _, c := range web.Containers {
		if u64(c.CPU.UsageNanoCores) != 250_000_000 || u64(c.CPU.UsageCoreNanoSeconds) != 5_000_000_000 ||
			u64(c.Memory.WorkingSetBytes) != 64<<20 || !c.CPU.Time.Time.Equal(clk.now()) {
			t.Errorf("web container %s: cpu %d/%d memory %d at %v", c.Name, u64(c.CPU.UsageNanoCores), u64(c.CPU.UsageCoreNanoSeconds),
				u64(c.Memory.WorkingSetBytes), c.CPU.Time)
		}
	}
	if web.Containers[0].Name != "app" || web.Containers[1].Name != "sidecar" {
		t.Errorf("containers: %s, %s", web.Containers[0].Name, web.Containers[1].Name)
	}
	if u64(web.CPU.UsageNanoCores) != 500_000_000 || u64(web.Memory.WorkingSetBytes) != 128<<20 {
		t.Errorf("web pod: cpu %d memory %d", u64(web.CPU.UsageNanoCores), u64(web.Memory.WorkingSetBytes))
	}
	if idlePod.PodRef.Name != "idle" || len(idlePod.Containers) != 1 || u64(idlePod.Containers[0].CPU.UsageNanoCores) != 0 ||
		u64(idlePod.Containers[0].Memory.WorkingSetBytes) != 0 {
		t.Errorf("idle pod (no annotations, one container exited): %+v", idlePod)
	}
	if u64(s.Node.CPU.UsageNanoCores) != 500_000_000 || u64(s.Node.Memory.WorkingSetBytes) != 128<<20 {
		t.Errorf("node: cpu %d memory %d", u64(s.Node.CPU.UsageNanoCores), u64(s.Node.Memory.WorkingSetBytes))
	}
}

// noRates is a runtime that reports only cumulative CPU usage and, optionally, no pod
// sandbox stats at all.
type noRates struct {
	*fakecri.CRI
	noSandboxStats bool
}

func (r noRates) ListContainerStats(ctx context.Context, in *runtimeapi.ListContainerStatsRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainerStatsResponse, error) {
	resp, err := r.CRI.ListContainerStats(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	resp = proto.Clone(resp).(*runtimeapi.ListContainerStatsResponse)
	for _, s := range resp.Stats {
		s.Cpu.UsageNanoCores = nil
	}
	return resp, nil
}

func (r noRates) ListPodSandboxStats(ctx context.Context, in *runtimeapi.ListPodSandboxStatsRequest, opts ...grpc.CallOption) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	if r.noSandboxStats {
		return nil, status.Error(codes.Unimplemented, "not implemented")
	}
	resp, err := r.CRI.ListPodSandboxStats(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	resp = proto.Clone(resp).(*runtimeapi.ListPodSandboxStatsResponse)
	for _, s := range resp.Stats {
		s.Linux.Cpu.UsageNanoCores = nil
	}
	return resp, nil
}

// Without rates from the runtime, the kubelet computes them from two samples.
func TestStatsSummaryComputesRates(t *testing.T) {
	for _, noSandboxStats := range []bool{false, true} {
		clk := &clock{t: time.Unix(1_700_000_000, 0)}
		cri := fakecri.New()
		cri.SetClock(clk.now)
		runPod(t, cri, "default", "web", map[string]string{hollow.CPUUsageAnnotation: "1500m"}, "app")
		clk.step(time.Minute)
		p := newStatsProvider(noRates{CRI: cri, noSandboxStats: noSandboxStats}, "node-a", clk.now)

		first := getSummary(t, p)
		c := first.Pods[0].Containers[0]
		if c.CPU.UsageNanoCores != nil || u64(c.CPU.UsageCoreNanoSeconds) != 90_000_000_000 || first.Pods[0].CPU.UsageNanoCores != nil ||
			first.Node.CPU.UsageNanoCores != nil {
			t.Errorf("sandbox stats %v: a first sample has a rate: %+v %+v", !noSandboxStats, c.CPU, first.Pods[0].CPU)
		}
		clk.step(10 * time.Second)
		second := getSummary(t, p)
		c = second.Pods[0].Containers[0]
		if u64(c.CPU.UsageNanoCores) != 1_500_000_000 || u64(second.Pods[0].CPU.UsageNanoCores) != 1_500_000_000 ||
			u64(second.Node.CPU.UsageNanoCores) != 1_500_000_000 {
			t.Errorf("sandbox stats %v: rates %d %d %d, want 1500m", !noSandboxStats, u64(c.CPU.UsageNanoCores),
				u64(second.Pods[0].CPU.UsageNanoCores), u64(second.Node.CPU.UsageNanoCores))
		}
	}
}

func TestCPURate(t *testing.T) {
	r := func(v uint64) *uint64 { return &v }
	for _, tc := range []struct {
		name      string
		prev, cur cpuSample
		want      int64
	}{
		{name: "first sample", cur: cpuSample{timestamp: 10, total: 5}, want: -1},
		{name: "rate", prev: cpuSample{timestamp: 1e9, total: 1e9}, cur: cpuSample{timestamp: 3e9, total: 2e9}, want: 5e8},
		{name: "same sample keeps its rate", prev: cpuSample{timestamp: 1e9, total: 1e9, rate: r(7)}, cur: cpuSample{timestamp: 1e9, total: 1e9}, want: 7},
		{name: "counter went back (restart)", prev: cpuSample{timestamp: 1e9, total: 5e9}, cur: cpuSample{timestamp: 2e9, total: 1e9}, want: -1},
		{name: "older sample", prev: cpuSample{timestamp: 2e9, total: 1e9}, cur: cpuSample{timestamp: 1e9, total: 1e9}, want: -1},
	} {
		if got := u64(cpuRate(tc.prev, tc.cur)); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// The server routes /stats/summary to the API server's kubelet client.
func TestStatsSummaryServed(t *testing.T) {
	cri := fakecri.New()
	runPod(t, cri, "default", "web", map[string]string{hollow.MemoryUsageAnnotation: "1Gi"}, "app")
	f := newFixtureWith(t, cri, filepath.Join(t.TempDir(), "pod-logs"))
	code, body := f.get("/stats/summary?only_cpu_and_memory=true")
	var s statsapi.Summary
	if err := json.Unmarshal([]byte(body), &s); code != http.StatusOK || err != nil {
		t.Fatalf("GET /stats/summary: %d %s (%v)", code, body, err)
	}
	if len(s.Pods) != 1 || u64(s.Pods[0].Memory.WorkingSetBytes) != 1<<30 {
		t.Errorf("summary: %+v", s.Pods)
	}
	other, otherKey := f.ca.issue(t, "someone", false)
	resp, err := f.httpClient(other, otherKey).Get(f.base + "/stats/summary")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("another client of the CA: %d, want 403", resp.StatusCode)
	}
}

// checkContainerdStats reads the summary of a node whose runtime is containerd, running
// the pod default/web (uid) with its container "app" busy writing its log.
func checkContainerdStats(t *testing.T, f *fixture, uid string) {
	t.Helper()
	summary := func() (statsapi.PodStats, bool) {
		code, body := f.get("/stats/summary")
		var s statsapi.Summary
		if err := json.Unmarshal([]byte(body), &s); code != http.StatusOK || err != nil {
			t.Fatalf("GET /stats/summary: %d %s (%v)", code, body, err)
		}
		for _, p := range s.Pods {
			if p.PodRef.UID == uid {
				return p, true
			}
		}
		return statsapi.PodStats{}, false
	}
	var pod statsapi.PodStats
	samples := 0
	testutil.Eventually(t, "a CPU rate of the container", func() bool {
		p, ok := summary()
		samples++
		if ok && len(p.Containers) == 1 {
			t.Logf("sample %d: container CPU rate %d, total %d", samples, u64(p.Containers[0].CPU.UsageNanoCores), u64(p.Containers[0].CPU.UsageCoreNanoSeconds))
		}
		if !ok || len(p.Containers) != 1 || p.Containers[0].CPU.UsageNanoCores == nil || *p.Containers[0].CPU.UsageNanoCores == 0 {
			time.Sleep(200 * time.Millisecond)
			return false
		}
		pod = p
		return true
	})
	c := pod.Containers[0]
	if pod.PodRef.Name != "web" || pod.PodRef.Namespace != "default" || c.Name != "app" || u64(c.CPU.UsageCoreNanoSeconds) <= 0 ||
		u64(c.Memory.WorkingSetBytes) <= 0 || u64(pod.Memory.WorkingSetBytes) <= 0 {
		t.Errorf("containerd stats: pod %+v cpu %d/%d memory %d", pod.PodRef, u64(c.CPU.UsageNanoCores), u64(c.CPU.UsageCoreNanoSeconds),
			u64(c.Memory.WorkingSetBytes))
	}
	// The resource metrics are containerd's cgroup counters too.
	res := scrape(t, f, "/metrics/resource")
	labels := `{container="app",namespace="default",pod="web"}`
	if res["resource_scrape_error"] != 0 || res["container_cpu_usage_seconds_total"+labels] <= 0 ||
		res["container_memory_working_set_bytes"+labels] <= 0 || res[`pod_memory_working_set_bytes{namespace="default",pod="web"}`] <= 0 ||
		res["node_cpu_usage_seconds_total"] <= 0 {
		t.Errorf("GET /metrics/resource on containerd: %v", res)
	}
}

// Once asked for, the stats are sampled in the background until the server stops.
func TestStatsSampledOnceAsked(t *testing.T) {
	cri := fakecri.New()
	runPod(t, cri, "default", "web", nil, "app")
	p := newStatsProvider(cri, "node-a", time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	p.sampleWhileAsked(ctx, 10*time.Millisecond)
	statsCalls := func() int {
		n := 0
		for _, c := range cri.Calls() {
			if c == "ListContainerStats" {
				n++
			}
		}
		return n
	}
	if statsCalls() != 0 {
		t.Fatal("sampled before anyone asked")
	}
	getSummary(t, p)
	testutil.Eventually(t, "background samples", func() bool { return statsCalls() >= 3 })
	cancel()
	p.wait()
	after := statsCalls()
	getSummary(t, p)
	if statsCalls() != after+1 {
		t.Errorf("sampling went on after the server stopped: %d calls, then %d", after, statsCalls())
	}
}

// A node that makes its own summary (a hollow kubelet) answers /stats/summary with it;
// the runtime's CRI stats are not read.
func TestStatsSummaryFromConfig(t *testing.T) {
	cri := fakecri.New()
	runPod(t, cri, "default", "in-cri", map[string]string{hollow.CPUUsageAnnotation: "1"}, "app")
	want := &statsapi.Summary{Node: statsapi.NodeStats{NodeName: "hollow-a"},
		Pods: []statsapi.PodStats{{PodRef: statsapi.PodReference{Namespace: "default", Name: "web"}}}}
	s := &Server{cfg: Config{Runtime: cri, Summary: func(context.Context) (*statsapi.Summary, error) { return want, nil }}}
	got := getSummary(t, s.handler())
	if got.Node.NodeName != "hollow-a" || len(got.Pods) != 1 || got.Pods[0].PodRef.Name != "web" {
		t.Errorf("summary %+v, want the node's own", got)
	}
}
