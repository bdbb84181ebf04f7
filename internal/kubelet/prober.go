package kubelet

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// ProbeType names one of a container's probes; it is how events name it ("Liveness probe
// failed: …").
type ProbeType string

// The probes a container may have.
const (
	ProbeStartup   ProbeType = "Startup"
	ProbeLiveness  ProbeType = "Liveness"
	ProbeReadiness ProbeType = "Readiness"
)

// ProbeResult is what one run of a probe found.
type ProbeResult int

const (
	// ProbeSuccess: the container answered as healthy.
	ProbeSuccess ProbeResult = iota
	// ProbeWarning counts as a success and is reported with a ProbeWarning event (an
	// HTTP redirect to another host, which is not followed).
	ProbeWarning
	// ProbeFailure: the container did not answer, or answered unhealthy.
	ProbeFailure

	// probeUnknown is the result before the first probe.
	probeUnknown ProbeResult = -1
)

// ContainerProber is what a real node's Runtime implements besides Runtime for the kubelet
// to probe its containers (a Runtime that does not implement it gets no probes, as on
// hollow nodes, where a running container is ready).
type ContainerProber interface {
	// Probe runs probe once against the container containerID (as the status shows it,
	// "<runtime>://<id>") of pod: exec runs the command in the container within the
	// probe's timeout; httpGet, tcpSocket and grpc connect from the pod's network
	// namespace. The output says what failed; an error means the probe could not be run
	// at all (its result is then ignored).
	Probe(ctx context.Context, pod *corev1.Pod, c *corev1.Container, containerID string, probe *corev1.Probe) (ProbeResult, string, error)
	// KillContainer stops the container containerID of pod (its preStop hook, then SIGTERM
	// and SIGKILL once grace is over) with a Killing event carrying message; the next
	// SyncPod starts it again as the pod's restartPolicy says. A container that is not
	// running is not an error.
	KillContainer(ctx context.Context, pod *corev1.Pod, containerID string, grace time.Duration, message string) error
}

// Probe defaults, as the API documents them.
const (
	defaultProbePeriod           = 10
	defaultProbeTimeout          = 1
	defaultProbeSuccessThreshold = 1
	defaultProbeFailureThreshold = 3
	// maxProbeAttempts is how often a probe that could not be run is tried again at once.
	maxProbeAttempts = 3
	// defaultTerminationGrace is a pod's termination grace period when its spec has none.
	defaultTerminationGrace = 30 * time.Second
)

// probeKey names a worker: one per pod, container and probe.
type probeKey struct {
	uid       types.UID
	container string
	probe     ProbeType
}

// probeKill is a container that failed its liveness or startup probe and is to be killed.
type probeKill struct {
	container   string
	containerID string
	grace       time.Duration
	message     string
}

// probeManager runs the probes of a real node's containers: a worker per pod, container
// and probe, started when the container runs and stopped when it stops. What the workers
// find becomes the containers' Started and Ready (observe), and liveness and startup
// failures the containers to kill (unhealthy); a change of either requeues the pod.
type probeManager struct {
	prober   ContainerProber
	clock    clock.WithTicker
	recorder record.EventRecorder
	log      *slog.Logger
	// requeue syncs the pod with this key again.
	requeue func(key string)
	// metrics counts the probes' results (nil: not counted).
	metrics *kubeletMetrics

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	workers map[probeKey]*probeWorker
}

func newProbeManager(prober ContainerProber, clk clock.WithTicker, recorder record.EventRecorder, log *slog.Logger, requeue func(string)) *probeManager {
	ctx, cancel := context.WithCancel(context.Background())
	return &probeManager{prober: prober, clock: clk, recorder: recorder, log: log, requeue: requeue,
		ctx: ctx, cancel: cancel, workers: map[probeKey]*probeWorker{}}
}

// run waits for ctx to end, then stops every worker and waits for them.
func (m *probeManager) run(ctx context.Context) {
	<-ctx.Done()
	m.cancel()
	m.mu.Lock()
	for k, w := range m.workers {
		w.cancel()
		delete(m.workers, k)
	}
	m.mu.Unlock()
	m.wg.Wait()
}

// probeOf is the container's probe of type t (nil when it has none).
func probeOf(c *corev1.Container, t ProbeType) *corev1.Probe {
	switch t {
	case ProbeStartup:
		return c.StartupProbe
	case ProbeLiveness:
		return c.LivenessProbe
	case ProbeReadiness:
		return c.ReadinessProbe
	}
	return nil
}

// probedContainers are the containers whose probes run: the app containers and the
// sidecars (init containers with restartPolicy Always).
func probedContainers(pod *corev1.Pod) []*corev1.Container {
	var out []*corev1.Container
	for i := range pod.Spec.InitContainers {
		if isSidecar(pod.Spec.InitContainers[i]) {
			out = append(out, &pod.Spec.InitContainers[i])
		}
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

var probeTypes = []ProbeType{ProbeStartup, ProbeLiveness, ProbeReadiness}

// withProbeDefaults is p with the API's defaults for what is unset.
func withProbeDefaults(p *corev1.Probe) corev1.Probe {
	out := *p
	if out.PeriodSeconds <= 0 {
		out.PeriodSeconds = defaultProbePeriod
	}
	if out.TimeoutSeconds <= 0 {
		out.TimeoutSeconds = defaultProbeTimeout
	}
	if out.SuccessThreshold <= 0 {
		out.SuccessThreshold = defaultProbeSuccessThreshold
	}
	if out.FailureThreshold <= 0 {
		out.FailureThreshold = defaultProbeFailureThreshold
	}
	if out.InitialDelaySeconds < 0 {
		out.InitialDelaySeconds = 0
	}
	return out
}

// runningInstance says whether a container state is a running instance.
func runningInstance(st ContainerState) bool {
	return !st.Terminated && !st.Waiting && st.ContainerID != ""
}

// observe starts the workers of the pod's running containers and stops those whose
// container stopped or was replaced, and returns states with the probes' verdicts: a
// running container with probes is Started once its startup probe passed (at once
// without one) and Ready once started and its readiness probe passed (at once without
// one). key is the pod's namespace/name. A nil manager returns states as they are.
func (m *probeManager) observe(key string, pod *corev1.Pod, states []ContainerState) []ContainerState {
	if m == nil {
		return states
	}
	byName := statesByName(states)
	m.mu.Lock()
	defer m.mu.Unlock()
	verdicts := map[string][2]bool{} // container → started, ready
	for _, c := range probedContainers(pod) {
		st, ok := byName[c.Name]
		up := ok && runningInstance(st)
		probed := false
		for _, t := range probeTypes {
			spec := probeOf(c, t)
			if spec == nil {
				continue
			}
			probed = true
			k := probeKey{uid: pod.UID, container: c.Name, probe: t}
			w := m.workers[k]
			if w != nil && (!up || w.containerID != st.ContainerID) {
				w.cancel()
				delete(m.workers, k)
				w = nil
			}
			if w == nil && up {
				m.startLocked(k, key, pod, c, spec, st)
			}
		}
		if !probed || !up {
			continue
		}
		started := m.verdictLocked(pod.UID, c, ProbeStartup, st.ContainerID)
		ready := started && m.verdictLocked(pod.UID, c, ProbeReadiness, st.ContainerID)
		verdicts[c.Name] = [2]bool{started, ready}
	}
	if len(verdicts) == 0 {
		return states
	}
	out := make([]ContainerState, len(states))
	copy(out, states)
	for i := range out {
		if v, ok := verdicts[out[i].Name]; ok {
			started, ready := v[0], v[1]
			out[i].Started, out[i].Ready = &started, &ready
		}
	}
	return out
}

// verdictLocked is what the container's probe t says for the instance containerID: true
// when the container has no such probe.
func (m *probeManager) verdictLocked(uid types.UID, c *corev1.Container, t ProbeType, containerID string) bool {
	if probeOf(c, t) == nil {
		return true
	}
	w := m.workers[probeKey{uid: uid, container: c.Name, probe: t}]
	return w != nil && w.containerID == containerID && w.state.ok
}

// unhealthy lists the pod's containers whose liveness or startup probe failed past its
// failure threshold and that were not killed for it yet, with the grace period (the
// probe's terminationGracePeriodSeconds, else the pod's) and the Killing message.
func (m *probeManager) unhealthy(pod *corev1.Pod) []probeKill {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []probeKill
	for _, c := range probedContainers(pod) {
		for _, t := range []ProbeType{ProbeStartup, ProbeLiveness} {
			w := m.workers[probeKey{uid: pod.UID, container: c.Name, probe: t}]
			if w == nil || !w.state.failed || w.killed {
				continue
			}
			msg := fmt.Sprintf("Container %s failed %s probe", c.Name, probeName(t))
			if pod.Spec.RestartPolicy != corev1.RestartPolicyNever || isSidecar(*c) {
				msg += ", will be restarted"
			}
			out = append(out, probeKill{container: c.Name, containerID: w.containerID, grace: probeGrace(pod, &w.spec), message: msg})
		}
	}
	return out
}

// killed marks a container's failed probes as acted on, so that it is killed only once.
func (m *probeManager) killed(uid types.UID, container, containerID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range []ProbeType{ProbeStartup, ProbeLiveness} {
		if w := m.workers[probeKey{uid: uid, container: container, probe: t}]; w != nil && w.containerID == containerID && w.state.failed {
			w.killed = true
		}
	}
}

// removePod stops the workers of a pod (deleted, terminal, or gone).
func (m *probeManager) removePod(uid types.UID) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, w := range m.workers {
		if k.uid == uid {
			w.cancel()
			delete(m.workers, k)
		}
	}
	m.metrics.forgetProbes(uid)
}

// probeGrace is how long a container killed for a failed probe gets to stop: the probe's
// terminationGracePeriodSeconds, else the pod's (30 s by default).
func probeGrace(pod *corev1.Pod, p *corev1.Probe) time.Duration {
	switch {
	case p.TerminationGracePeriodSeconds != nil:
		return time.Duration(*p.TerminationGracePeriodSeconds) * time.Second
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return defaultTerminationGrace
}

func probeName(t ProbeType) string {
	switch t {
	case ProbeStartup:
		return "startup"
	case ProbeLiveness:
		return "liveness"
	}
	return "readiness"
}

// containerRef is the event object of a pod's container: the pod with the container's
// field path.
func containerRef(pod *corev1.Pod, name string) *corev1.ObjectReference {
	ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, Namespace: pod.Namespace,
		UID: pod.UID, ResourceVersion: pod.ResourceVersion, FieldPath: fmt.Sprintf("spec.containers{%s}", name)}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			ref.FieldPath = fmt.Sprintf("spec.initContainers{%s}", name)
		}
	}
	return ref
}

// killUnhealthy kills the pod's containers whose liveness or startup probe failed, before
// the runtime syncs the pod (which starts them again as restartPolicy says).
func (k *Kubelet) killUnhealthy(ctx context.Context, pod *corev1.Pod) error {
	kills := k.probes.unhealthy(pod)
	for _, kill := range kills {
		k.log.Info("killing a container that failed its probe", "pod", pod.Namespace+"/"+pod.Name, "container", kill.container,
			"id", kill.containerID, "grace", kill.grace)
		if err := k.prober.KillContainer(ctx, pod, kill.containerID, kill.grace, kill.message); err != nil {
			return fmt.Errorf("kill container %s of pod %s/%s: %w", kill.container, pod.Namespace, pod.Name, err)
		}
		k.probes.killed(pod.UID, kill.container, kill.containerID)
	}
	return nil
}
