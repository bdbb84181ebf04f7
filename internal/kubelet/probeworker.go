package kubelet

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Event reasons of the probes.
const (
	reasonUnhealthy    = "Unhealthy"
	reasonProbeWarning = "ProbeWarning"
)

// probeState is a probe's verdict on one container instance and the run of equal results
// that leads to it.
type probeState struct {
	// ok is the verdict: the container is started (startup probe), healthy (liveness)
	// or ready (readiness).
	ok bool
	// failed: a liveness or startup probe failed failureThreshold times in a row; the
	// container is to be killed and the probe stops.
	failed bool
	last   ProbeResult
	run    int
}

// initialProbeState is the verdict before the first probe: not started, healthy, not
// ready.
func initialProbeState(t ProbeType) probeState {
	return probeState{ok: t == ProbeLiveness, last: probeUnknown}
}

// record takes one result of probe spec (of type t) and says whether the verdict changed:
// it flips once successThreshold successes or failureThreshold failures came in a row. A
// warning counts as a success.
func (s *probeState) record(t ProbeType, spec *corev1.Probe, r ProbeResult) bool {
	if r == ProbeWarning {
		r = ProbeSuccess
	}
	if r == s.last {
		s.run++
	} else {
		s.last, s.run = r, 1
	}
	if (r == ProbeFailure && s.run < int(spec.FailureThreshold)) || (r == ProbeSuccess && s.run < int(spec.SuccessThreshold)) {
		return false
	}
	ok := r == ProbeSuccess
	changed := ok != s.ok
	s.ok = ok
	if !ok && (t == ProbeLiveness || t == ProbeStartup) {
		s.failed, s.run, changed = true, 0, true
	}
	return changed
}

// done says whether the probe has nothing more to find on this instance: the startup probe
// passed, or a liveness or startup probe failed (the container is killed).
func (s *probeState) done(t ProbeType) bool {
	return s.failed || (t == ProbeStartup && s.ok)
}

// probeWorker probes one container instance with one of its probes.
type probeWorker struct {
	m      *probeManager
	key    probeKey
	podKey string
	pod    *corev1.Pod
	// container is the spec; spec its probe with defaults.
	container   *corev1.Container
	spec        corev1.Probe
	containerID string
	startedAt   time.Time
	cancel      context.CancelFunc
	// wake makes the worker probe now (a gated probe once the startup probe passed).
	wake chan struct{}

	// state and killed are guarded by the manager's mutex.
	state  probeState
	killed bool
}

// observe counts one run of the probe in the kubelet's metrics unless the worker was
// replaced or stopped meanwhile (its pod's series may be gone), which it says.
func (w *probeWorker) observe(res ProbeResult, err error, took time.Duration) bool {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	if w.m.workers[w.key] != w {
		return false
	}
	w.m.metrics.observeProbe(w.pod, w.container.Name, w.key.probe, res, err, took)
	return true
}

// startLocked starts the worker k for the running instance st of container c.
func (m *probeManager) startLocked(k probeKey, podKey string, pod *corev1.Pod, c *corev1.Container, spec *corev1.Probe, st ContainerState) {
	if m.ctx.Err() != nil {
		return // stopping: run is waiting for the workers it has
	}
	ctx, cancel := context.WithCancel(m.ctx)
	w := &probeWorker{m: m, key: k, podKey: podKey, pod: pod, container: c, spec: withProbeDefaults(spec),
		containerID: st.ContainerID, startedAt: st.StartedAt, cancel: cancel, wake: make(chan struct{}, 1),
		state: initialProbeState(k.probe)}
	if w.startedAt.IsZero() {
		w.startedAt = m.clock.Now()
	}
	m.workers[k] = w
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		w.run(ctx)
	}()
}

// run probes at startedAt+initialDelaySeconds, then every periodSeconds, until the probe
// is done or the worker is stopped.
func (w *probeWorker) run(ctx context.Context) {
	period := time.Duration(w.spec.PeriodSeconds) * time.Second
	first := w.startedAt.Add(time.Duration(w.spec.InitialDelaySeconds) * time.Second)
	timer := w.m.clock.NewTimer(max(first.Sub(w.m.clock.Now()), 0))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		case <-w.wake:
			if w.m.clock.Now().Before(first) {
				continue // still in its initial delay: the timer fires then
			}
			if !timer.Stop() {
				select {
				case <-timer.C():
				default:
				}
			}
		}
		start := w.m.clock.Now()
		if !w.probeOnce(ctx) {
			return
		}
		timer.Reset(max(start.Add(period).Sub(w.m.clock.Now()), 0))
	}
}

// probeOnce runs the probe unless it waits for the startup probe, records the result and
// says whether to go on.
func (w *probeWorker) probeOnce(ctx context.Context) bool {
	w.m.mu.Lock()
	done, waiting := w.state.done(w.key.probe), w.key.probe != ProbeStartup &&
		!w.m.verdictLocked(w.key.uid, w.container, ProbeStartup, w.containerID)
	w.m.mu.Unlock()
	switch {
	case done:
		return false
	case waiting:
		return true // liveness and readiness wait for the startup probe
	}
	var (
		res ProbeResult
		out string
		err error
	)
	start := w.m.clock.Now()
	for i := 0; i < maxProbeAttempts; i++ {
		res, out, err = w.m.prober.Probe(ctx, w.pod, w.container, w.containerID, &w.spec)
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if ctx.Err() != nil {
		return false // stopped meanwhile: the result is of no use
	}
	took := w.m.clock.Since(start)
	ref := containerRef(w.pod, w.container.Name)
	if !w.observe(res, err, took) {
		return false // replaced or stopped meanwhile
	}
	switch {
	case err != nil:
		w.m.log.Debug("probe errored", "pod", w.podKey, "container", w.container.Name, "probe", w.key.probe, "err", err)
		w.m.recorder.Eventf(ref, corev1.EventTypeWarning, reasonUnhealthy, "%s probe errored and resulted in unknown state: %v", w.key.probe, err)
		return true
	case res == ProbeWarning:
		w.m.recorder.Eventf(ref, corev1.EventTypeWarning, reasonProbeWarning, "%s probe warning: %s", w.key.probe, out)
	case res == ProbeFailure:
		w.m.log.Debug("probe failed", "pod", w.podKey, "container", w.container.Name, "probe", w.key.probe, "output", out)
		w.m.recorder.Eventf(ref, corev1.EventTypeWarning, reasonUnhealthy, "%s probe failed: %s", w.key.probe, out)
	}
	w.m.mu.Lock()
	if w.m.workers[w.key] != w {
		w.m.mu.Unlock()
		return false // replaced or stopped meanwhile
	}
	changed := w.state.record(w.key.probe, &w.spec, res)
	done, ok := w.state.done(w.key.probe), w.state.ok
	var gated []*probeWorker
	if changed && w.key.probe == ProbeStartup && ok {
		for _, t := range []ProbeType{ProbeLiveness, ProbeReadiness} {
			if o := w.m.workers[probeKey{uid: w.key.uid, container: w.key.container, probe: t}]; o != nil && o.containerID == w.containerID {
				gated = append(gated, o)
			}
		}
	}
	w.m.mu.Unlock()
	for _, o := range gated {
		select {
		case o.wake <- struct{}{}:
		default:
		}
	}
	if changed {
		w.m.log.Info("probe verdict changed", "pod", w.podKey, "container", w.container.Name, "probe", w.key.probe, "ok", ok)
		w.m.requeue(w.podKey)
	}
	return !done
}
