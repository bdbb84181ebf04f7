package kubelet

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// A probe's verdict flips only after successThreshold successes or failureThreshold
// failures in a row; liveness and startup failures are final for the instance.
func TestProbeStateRecord(t *testing.T) {
	const S, W, F = ProbeSuccess, ProbeWarning, ProbeFailure
	for _, tc := range []struct {
		name    string
		probe   ProbeType
		success int32
		failure int32
		results []ProbeResult
		// ok and changed after each result; done after the last.
		ok, changed []bool
		done        bool
	}{
		{name: "readiness needs two successes, three failures", probe: ProbeReadiness, success: 2, failure: 3,
			results: []ProbeResult{S, S, F, F, S, F, F, F, W, S},
			ok:      []bool{false, true, true, true, true, true, true, false, false, true},
			changed: []bool{false, true, false, false, false, false, false, true, false, true}},
		{name: "liveness fails after three failures in a row", probe: ProbeLiveness, success: 1, failure: 3,
			results: []ProbeResult{F, F, S, F, F, F},
			ok:      []bool{true, true, true, true, true, false},
			changed: []bool{false, false, false, false, false, true}, done: true},
		{name: "startup passes at once", probe: ProbeStartup, success: 1, failure: 3,
			results: []ProbeResult{F, W},
			ok:      []bool{false, true},
			changed: []bool{false, true}, done: true},
		{name: "startup fails past its threshold", probe: ProbeStartup, success: 1, failure: 2,
			results: []ProbeResult{F, F},
			ok:      []bool{false, false},
			changed: []bool{false, true}, done: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &corev1.Probe{SuccessThreshold: tc.success, FailureThreshold: tc.failure}
			s := initialProbeState(tc.probe)
			for i, r := range tc.results {
				changed := s.record(tc.probe, spec, r)
				if s.ok != tc.ok[i] || changed != tc.changed[i] {
					t.Fatalf("after result %d (%d): ok %v changed %v, want %v %v", i, r, s.ok, changed, tc.ok[i], tc.changed[i])
				}
			}
			if s.done(tc.probe) != tc.done {
				t.Errorf("done = %v, want %v", s.done(tc.probe), tc.done)
			}
		})
	}
}

// fakeProber answers probes from per-probe scripts and records the calls and kills.
type fakeProber struct {
	clock   *testingclock.FakeClock
	mu      sync.Mutex
	results map[ProbeType]ProbeResult
	calls   []probeCall
	kills   []string
}

type probeCall struct {
	probe       ProbeType
	containerID string
	at          time.Time
}

func (f *fakeProber) Probe(_ context.Context, _ *corev1.Pod, c *corev1.Container, containerID string, p *corev1.Probe) (ProbeResult, string, error) {
	t := ProbeReadiness
	switch p.Exec.Command[0] {
	case "startup":
		t = ProbeStartup
	case "liveness":
		t = ProbeLiveness
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, probeCall{probe: t, containerID: containerID, at: f.clock.Now()})
	if f.results[t] == ProbeFailure {
		return ProbeFailure, "boom from " + c.Name, nil
	}
	return f.results[t], "", nil
}

func (f *fakeProber) KillContainer(_ context.Context, _ *corev1.Pod, containerID string, grace time.Duration, message string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kills = append(f.kills, fmt.Sprintf("%s %s %s", containerID, grace, message))
	return nil
}

func (f *fakeProber) set(t ProbeType, r ProbeResult) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.results[t] = r
}

func (f *fakeProber) callsOf(t ProbeType) []probeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []probeCall
	for _, c := range f.calls {
		if c.probe == t {
			out = append(out, c)
		}
	}
	return out
}

func execProbe(name string, initialDelay, period int32) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{name}}},
		InitialDelaySeconds: initialDelay, PeriodSeconds: period}
}

type probeHarness struct {
	m       *probeManager
	prober  *fakeProber
	clock   *testingclock.FakeClock
	events  *record.FakeRecorder
	mu      sync.Mutex
	requeue []string
}

func newProbeHarness(t *testing.T) *probeHarness {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	h := &probeHarness{clock: clk, events: record.NewFakeRecorder(100),
		prober: &fakeProber{clock: clk, results: map[ProbeType]ProbeResult{}}}
	h.m = newProbeManager(h.prober, clk, h.events, slog.New(slog.DiscardHandler), func(key string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.requeue = append(h.requeue, key)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.m.run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

func (h *probeHarness) requeued() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.requeue)
}

func (h *probeHarness) worker(pod *corev1.Pod, container string, t ProbeType) *probeWorker {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	return h.m.workers[probeKey{uid: pod.UID, container: container, probe: t}]
}

func probedPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-1"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: ptr.To[int64](7),
			Containers: []corev1.Container{{Name: "app"}, {Name: "plain"}}},
	}
}

func runningState(name, id string, at time.Time) ContainerState {
	return ContainerState{Name: name, ContainerID: id, StartedAt: at}
}

func verdict(t *testing.T, states []ContainerState, name string) (started, ready bool) {
	t.Helper()
	for _, s := range states {
		if s.Name == name {
			if s.Started == nil || s.Ready == nil {
				t.Fatalf("container %s has no probe verdicts: %+v", name, s)
			}
			return *s.Started, *s.Ready
		}
	}
	t.Fatalf("no container %s", name)
	return false, false
}

// A probe runs first at the container's start plus initialDelaySeconds, then every
// periodSeconds.
func TestProbeWorkerTiming(t *testing.T) {
	h := newProbeHarness(t)
	pod := probedPod()
	pod.Spec.Containers[0].ReadinessProbe = execProbe("readiness", 5, 2)
	t0 := h.clock.Now()
	h.m.observe("default/web", pod, []ContainerState{runningState("app", "fake://a1", t0)})
	testutil.Eventually(t, "worker waiting", h.clock.HasWaiters)

	h.clock.Step(4 * time.Second)
	if !h.clock.HasWaiters() || len(h.prober.callsOf(ProbeReadiness)) != 0 {
		t.Fatal("probed within the initial delay")
	}
	h.clock.Step(time.Second) // t0+5s
	testutil.Eventually(t, "first probe", func() bool { return len(h.prober.callsOf(ProbeReadiness)) == 1 && h.clock.HasWaiters() })
	h.clock.Step(1999 * time.Millisecond)
	if !h.clock.HasWaiters() || len(h.prober.callsOf(ProbeReadiness)) != 1 {
		t.Fatal("probed again before the period was over")
	}
	h.clock.Step(time.Millisecond) // t0+7s
	testutil.Eventually(t, "second probe", func() bool { return len(h.prober.callsOf(ProbeReadiness)) == 2 && h.clock.HasWaiters() })
	calls := h.prober.callsOf(ProbeReadiness)
	if !calls[0].at.Equal(t0.Add(5*time.Second)) || !calls[1].at.Equal(t0.Add(7*time.Second)) || calls[0].containerID != "fake://a1" {
		t.Errorf("probe calls %+v, want at t0+5s and t0+7s on fake://a1", calls)
	}
	// One success (successThreshold 1) makes the container ready and requeues the pod.
	if h.requeued() != 1 {
		t.Errorf("pod requeued %d times, want once (ready after the first success, nothing new after)", h.requeued())
	}
	if _, ready := verdict(t, h.m.observe("default/web", pod, []ContainerState{runningState("app", "fake://a1", t0)}), "app"); !ready {
		t.Error("not ready after a successful readiness probe")
	}
}

// The startup probe gates liveness and readiness; the verdicts become the containers'
// Started and Ready; liveness failures past the threshold make the container one to kill;
// a new instance starts over; a stopped container's workers go.
func TestProbeManagerVerdicts(t *testing.T) {
	h := newProbeHarness(t)
	pod := probedPod()
	app := &pod.Spec.Containers[0]
	// Initial delays keep the workers' own timers from firing: the test drives them.
	app.StartupProbe = execProbe("startup", 100, 1)
	app.LivenessProbe = execProbe("liveness", 100, 1)
	app.ReadinessProbe = execProbe("readiness", 100, 1)
	app.LivenessProbe.TerminationGracePeriodSeconds = ptr.To[int64](3)
	t0 := h.clock.Now()
	states := []ContainerState{runningState("app", "fake://a1", t0), runningState("plain", "fake://p1", t0)}
	key := "default/web"
	ctx := context.Background()

	got := h.m.observe(key, pod, states)
	if started, ready := verdict(t, got, "app"); started || ready {
		t.Errorf("before any probe: started %v ready %v", started, ready)
	}
	for _, s := range got {
		if s.Name == "plain" && (s.Started != nil || s.Ready != nil) {
			t.Errorf("container without probes got verdicts: %+v", s)
		}
	}
	if st := runtimeStatus(pod, got, "", "10.0.0.5", true, metav1.Now()); podReadyCondition(st) != corev1.ConditionFalse ||
		st.ContainerStatuses[0].Ready || *st.ContainerStatuses[0].Started || !st.ContainerStatuses[1].Ready {
		t.Errorf("status before the startup probe passed: %+v", st)
	}

	startup, liveness, readiness := h.worker(pod, "app", ProbeStartup), h.worker(pod, "app", ProbeLiveness), h.worker(pod, "app", ProbeReadiness)
	if startup == nil || liveness == nil || readiness == nil || h.worker(pod, "plain", ProbeReadiness) != nil {
		t.Fatal("want a worker per probe of app and none for plain")
	}
	h.prober.set(ProbeReadiness, ProbeSuccess)
	readiness.probeOnce(ctx)
	liveness.probeOnce(ctx)
	if n := len(h.prober.callsOf(ProbeLiveness)) + len(h.prober.callsOf(ProbeReadiness)); n != 0 {
		t.Fatalf("liveness or readiness probed before the startup probe passed (%d calls)", n)
	}
	startup.probeOnce(ctx)
	if started, ready := verdict(t, h.m.observe(key, pod, states), "app"); !started || ready {
		t.Errorf("after the startup probe: started %v ready %v, want started, not ready", started, ready)
	}
	if startup.probeOnce(ctx); len(h.prober.callsOf(ProbeStartup)) != 1 {
		t.Error("startup probe ran again after it passed")
	}
	readiness.probeOnce(ctx)
	got = h.m.observe(key, pod, states)
	if started, ready := verdict(t, got, "app"); !started || !ready {
		t.Errorf("after the readiness probe: started %v ready %v", started, ready)
	}
	if st := runtimeStatus(pod, got, "", "10.0.0.5", true, metav1.Now()); podReadyCondition(st) != corev1.ConditionTrue || !st.ContainerStatuses[0].Ready {
		t.Errorf("status once ready: %+v", st)
	}
	if h.requeued() != 2 {
		t.Errorf("requeued %d times, want 2 (started, ready)", h.requeued())
	}

	h.prober.set(ProbeLiveness, ProbeFailure)
	for i := 0; i < 2; i++ {
		liveness.probeOnce(ctx)
		if k := h.m.unhealthy(pod); len(k) != 0 {
			t.Fatalf("kill after %d failures: %+v", i+1, k)
		}
	}
	if liveness.probeOnce(ctx) {
		t.Error("liveness worker goes on after the container failed")
	}
	kills := h.m.unhealthy(pod)
	if len(kills) != 1 || kills[0].containerID != "fake://a1" || kills[0].grace != 3*time.Second ||
		kills[0].message != "Container app failed liveness probe, will be restarted" {
		t.Fatalf("kills = %+v", kills)
	}
	h.m.killed(pod.UID, "app", "fake://a1")
	if k := h.m.unhealthy(pod); len(k) != 0 {
		t.Errorf("killed twice: %+v", k)
	}
	var unhealthy int
	for len(h.events.Events) > 0 {
		if e := <-h.events.Events; e == "Warning Unhealthy Liveness probe failed: boom from app" {
			unhealthy++
		}
	}
	if unhealthy != 3 {
		t.Errorf("%d Unhealthy events for the liveness failures, want 3", unhealthy)
	}

	// The restarted instance is probed afresh: not started, not ready.
	states[0] = runningState("app", "fake://a2", t0.Add(time.Minute))
	if started, ready := verdict(t, h.m.observe(key, pod, states), "app"); started || ready {
		t.Errorf("new instance: started %v ready %v", started, ready)
	}
	if w := h.worker(pod, "app", ProbeLiveness); w == nil || w == liveness || w.containerID != "fake://a2" || w.state.failed {
		t.Errorf("liveness worker of the new instance: %+v", w)
	}
	// A stopped container has no workers; nor has a removed pod.
	states[0] = ContainerState{Name: "app", ContainerID: "fake://a2", Terminated: true}
	h.m.observe(key, pod, states)
	if h.worker(pod, "app", ProbeStartup) != nil || h.worker(pod, "app", ProbeReadiness) != nil {
		t.Error("workers left for a terminated container")
	}
	states[0] = runningState("app", "fake://a3", t0)
	h.m.observe(key, pod, states)
	h.m.removePod(pod.UID)
	if len(h.m.workers) != 0 {
		t.Errorf("workers left after the pod went: %d", len(h.m.workers))
	}
}

// A startup probe that fails past its threshold kills the container; under
// restartPolicy Never it is not restarted.
func TestStartupProbeFailureKills(t *testing.T) {
	h := newProbeHarness(t)
	pod := probedPod()
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.Containers[0].StartupProbe = execProbe("startup", 100, 1)
	pod.Spec.Containers[0].StartupProbe.FailureThreshold = 1
	h.m.observe("default/web", pod, []ContainerState{runningState("app", "fake://a1", h.clock.Now())})
	h.prober.set(ProbeStartup, ProbeFailure)
	h.worker(pod, "app", ProbeStartup).probeOnce(context.Background())
	kills := h.m.unhealthy(pod)
	if len(kills) != 1 || kills[0].message != "Container app failed startup probe" || kills[0].grace != 7*time.Second {
		t.Errorf("kills = %+v", kills)
	}
}

func podReadyCondition(st corev1.PodStatus) corev1.ConditionStatus {
	for _, c := range st.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status
		}
	}
	return ""
}

// A probe that cannot be run is tried three times and then ignored, with an event.
func TestProbeErrorIsIgnored(t *testing.T) {
	h := newProbeHarness(t)
	pod := probedPod()
	pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{InitialDelaySeconds: 100,
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{}}}
	erring := &erringProber{}
	h.m.prober = erring
	h.m.observe("default/web", pod, []ContainerState{runningState("app", "fake://a1", h.clock.Now())})
	w := h.worker(pod, "app", ProbeReadiness)
	if !w.probeOnce(context.Background()) || erring.calls != 3 || w.state.last != probeUnknown {
		t.Errorf("erring probe: %d calls, state %+v", erring.calls, w.state)
	}
	if e := <-h.events.Events; !strings.HasPrefix(e, "Warning Unhealthy Readiness probe errored and resulted in unknown state: no network") {
		t.Errorf("event %q", e)
	}
}

type erringProber struct{ calls int }

func (e *erringProber) Probe(context.Context, *corev1.Pod, *corev1.Container, string, *corev1.Probe) (ProbeResult, string, error) {
	e.calls++
	return ProbeFailure, "", fmt.Errorf("no network")
}

func (e *erringProber) KillContainer(context.Context, *corev1.Pod, string, time.Duration, string) error {
	return nil
}

// probedRuntime is a real node's runtime for the kubelet's probe tests: every container
// runs; a killed container is running again at the next SyncPod with its restart count
// up; probes answer as the test says.
type probedRuntime struct {
	mu       sync.Mutex
	restarts map[string]int32
	kills    []string
	ready    bool // readiness probes pass
	alive    bool // liveness probes pass
}

func (r *probedRuntime) states(pod *corev1.Pod) []ContainerState {
	var out []ContainerState
	for _, c := range pod.Spec.Containers {
		n := r.restarts[c.Name]
		s := ContainerState{Name: c.Name, Image: c.Image, ImageID: c.Image + "@sha256:0", RestartCount: n,
			ContainerID: fmt.Sprintf("fake://%s-%d", c.Name, n), StartedAt: time.Now().Truncate(time.Second)}
		if n > 0 {
			s.LastTerminated = &ContainerState{Name: c.Name, Terminated: true, ExitCode: 137, Reason: "Error",
				ContainerID: fmt.Sprintf("fake://%s-%d", c.Name, n-1)}
		}
		out = append(out, s)
	}
	return out
}

func (r *probedRuntime) SyncPod(_ context.Context, pod *corev1.Pod, _ PodVolumes) (PodStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return PodStatus{SandboxID: "sb-" + string(pod.UID), IP: "10.1.0.5", Containers: r.states(pod)}, nil
}

func (r *probedRuntime) KillPod(_ context.Context, pod *corev1.Pod, _ time.Duration) (PodStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.states(pod)
	for i := range st {
		st[i].Terminated, st[i].ExitCode, st[i].Reason = true, 0, "Completed"
	}
	return PodStatus{Containers: st}, nil
}

func (r *probedRuntime) Relist(context.Context) (map[types.UID]string, error) { return nil, nil }
func (r *probedRuntime) Ready(context.Context) error                          { return nil }
func (r *probedRuntime) Version(context.Context) (string, error)              { return "probed://0", nil }

func (r *probedRuntime) Probe(_ context.Context, _ *corev1.Pod, _ *corev1.Container, _ string, p *corev1.Probe) (ProbeResult, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ok := r.ready
	if p.Exec.Command[0] == "liveness" {
		ok = r.alive
	}
	if ok {
		return ProbeSuccess, "", nil
	}
	return ProbeFailure, "not yet", nil
}

func (r *probedRuntime) KillContainer(_ context.Context, pod *corev1.Pod, containerID string, grace time.Duration, message string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kills = append(r.kills, fmt.Sprintf("%s %s %s", containerID, grace, message))
	id := strings.TrimPrefix(containerID, "fake://")
	r.restarts[id[:strings.LastIndex(id, "-")]]++
	r.alive = true
	return nil
}

func (r *probedRuntime) set(f func(r *probedRuntime)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

// On a real node the probes decide the pod's readiness, promptly (the pod is synced again
// when a verdict changes, not at the next PLEG change), and a liveness failure has the
// container killed and restarted, with Unhealthy events.
func TestKubeletProbesDriveStatus(t *testing.T) {
	api := apiservertest.Start(t, apiservertest.Options{})
	c, ctx := api.Client, context.Background()
	rt := &probedRuntime{restarts: map[string]int32{}, alive: true}
	factory := informers.NewSharedInformerFactory(c, 0)
	k, err := New(Config{NodeName: "probed-a", Zone: "us-east-1a", InstanceID: "i-0p", RootDir: t.TempDir(), PodEvents: true,
		StatusUpdateInterval: time.Second, LeaseDuration: 4 * time.Second, LeaseRenewInterval: time.Second},
		c, factory, Deps{Runtime: rt, Mounter: newHollowMounter(nil)})
	if err != nil {
		t.Fatal(err)
	}
	startInformers(t, factory)
	testutil.Start(t, "the kubelet", 0, k.Run, testutil.NoWait)

	pod := testPod("probed", "probed-a")
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
	// The probes are under test, not the service account token volume (a tmpfs, and the
	// kube-root-ca.crt ConfigMap no controller publishes here).
	pod.Spec.AutomountServiceAccountToken = ptr.To(false)
	pod.Spec.Containers[0].ReadinessProbe = execProbe("readiness", 0, 1)
	pod.Spec.Containers[0].LivenessProbe = execProbe("liveness", 0, 1)
	pod.Spec.Containers[0].LivenessProbe.FailureThreshold = 1
	if _, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	get := func(ctx context.Context) *corev1.Pod {
		p, err := c.CoreV1().Pods("default").Get(ctx, "probed", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	testutil.Eventually(t, "pod Running, not ready while its readiness probe fails", func() (bool, error) {
		p := get(ctx)
		cs := p.Status.ContainerStatuses
		return p.Status.Phase == corev1.PodRunning && podReadyCondition(p.Status) == corev1.ConditionFalse && len(cs) == 1 &&
			cs[0].State.Running != nil && !cs[0].Ready && *cs[0].Started, nil
	})
	testutil.Eventually(t, "Unhealthy event of the readiness probe", func() (bool, error) {
		return hasEvent(ctx, t, c, "Unhealthy", "Readiness probe failed: not yet"), nil
	})

	rt.set(func(r *probedRuntime) { r.ready = true })
	testutil.Eventually(t, "pod Ready once the probe passes", func() (bool, error) {
		p := get(ctx)
		return podReadyCondition(p.Status) == corev1.ConditionTrue && p.Status.ContainerStatuses[0].Ready, nil
	})

	rt.set(func(r *probedRuntime) { r.alive = false })
	testutil.Eventually(t, "container restarted after its liveness probe failed", func() (bool, error) {
		cs := get(ctx).Status.ContainerStatuses
		return len(cs) == 1 && cs[0].RestartCount == 1 && cs[0].LastTerminationState.Terminated != nil && cs[0].Ready, nil
	})
	rt.mu.Lock()
	kills := append([]string(nil), rt.kills...)
	rt.mu.Unlock()
	if len(kills) != 1 || kills[0] != "fake://app-0 5s Container app failed liveness probe, will be restarted" {
		t.Errorf("kills = %q", kills)
	}
	testutil.Eventually(t, "Unhealthy event of the liveness probe", func() (bool, error) {
		return hasEvent(ctx, t, c, "Unhealthy", "Liveness probe failed: not yet"), nil
	})
	// What the kubelet serves at /metrics and /metrics/probes.
	m := gathered(t, k.Metrics())
	if m["kubelet_running_pods"] != 1 || m[`kubelet_running_containers{container_state="running"}`] != 1 ||
		m[`kubelet_running_containers{container_state="exited"}`] != 1 || m[`kubelet_node_name{node="probed-a"}`] != 1 {
		t.Errorf("kubelet metrics: %v", m)
	}
	probes := gathered(t, k.ProbeMetrics())
	labels := func(probe, result string) string {
		return fmt.Sprintf(`prober_probe_total{container="app",namespace="default",pod="probed",pod_uid=%q,probe_type=%q,result=%q}`, get(ctx).UID, probe, result)
	}
	for _, key := range []string{labels("Readiness", "failed"), labels("Readiness", "successful"), labels("Liveness", "successful"), labels("Liveness", "failed")} {
		if probes[key] < 1 {
			t.Errorf("%s = %v; all: %v", key, probes[key], probes)
		}
	}
}

func hasEvent(ctx context.Context, t *testing.T, c kubernetes.Interface, reason, message string) bool {
	t.Helper()
	evs, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=probed,reason=" + reason})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.Message == message && e.InvolvedObject.FieldPath == "spec.containers{app}" {
			return true
		}
	}
	return false
}
