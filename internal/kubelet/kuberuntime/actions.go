package kuberuntime

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// startAction creates and starts a new instance of a container.
type startAction struct {
	container *corev1.Container
	ctype     containerType
	// attempt is the new instance's restart count.
	attempt uint32
	// last is the container's newest exited instance: the restart waits for its back-off.
	last *instance
	// noBackOff restarts at once (a container recreated because its spec changed).
	noBackOff bool
	// target is an ephemeral container's targetContainerName, and targetID the id of
	// that container's running instance ("" when it does not run).
	target, targetID string
}

// killAction stops a running instance.
type killAction struct {
	inst      instance
	container *corev1.Container
	// message is the Killing event's message.
	message string
}

// podActions is what a sync does to bring a pod's sandbox and containers to its spec.
type podActions struct {
	// createSandbox makes a new sandbox with attempt; sandboxChanged says the pod had one
	// that is not ready any more (the SandboxChanged event).
	createSandbox, sandboxChanged bool
	attempt                       uint32
	// sandboxID is the ready sandbox the containers start in ("" while none).
	sandboxID string
	// killPod stops every running container and the ready sandboxes: before a new
	// sandbox, or when nothing of the pod is to run any more.
	killPod bool
	// purgeInit removes the init containers' instances, which run again in a new sandbox.
	purgeInit bool
	// initFailed: a regular init container failed and the pod does not restart it.
	initFailed bool
	kill       []killAction
	// resize are running instances given their container's new resources in place.
	resize []resizeAction
	// startInit are started in order; a regular init container that cannot be started
	// stops the list.
	startInit []startAction
	start     []startAction
	// startEphemeral are started in a pod that keeps running (not with killPod).
	startEphemeral []startAction
}

func newStart(c *corev1.Container, t containerType, v *podView) startAction {
	s := startAction{container: c, ctype: t}
	if l := v.latest(c.Name); l != nil {
		s.attempt = l.attempt + 1
		if l.exited() {
			s.last = l
		}
	}
	return s
}

// shouldRestart says whether a container whose newest instance is latest (nil: none) is
// to be started: never started, stuck in created or unknown, or exited and the restart
// policy wants it again. Sidecars are restarted whatever the pod's policy. Nothing
// restarts in a pod being deleted.
func shouldRestart(pod *corev1.Pod, t containerType, latest *instance) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	if latest == nil {
		return true
	}
	switch latest.state {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return false
	case runtimeapi.ContainerState_CONTAINER_CREATED, runtimeapi.ContainerState_CONTAINER_UNKNOWN:
		return true
	}
	if t == typeSidecar {
		return true
	}
	switch pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return latest.exitCode != 0
	}
	return true
}

// initFailed says whether a regular init container's instance ended in failure.
func initFailed(i *instance) bool {
	return i.state == runtimeapi.ContainerState_CONTAINER_UNKNOWN || (i.exited() && i.exitCode != 0)
}

// computePodActions decides what a sync does, from the pod's spec and what the runtime
// holds for it.
func computePodActions(pod *corev1.Pod, v *podView) podActions {
	var a podActions
	if pod.DeletionTimestamp != nil {
		return a // the kubelet kills it
	}
	ready := v.readySandbox()
	if ready == nil {
		return sandboxActions(pod, v)
	}
	a.sandboxID = ready.id
	a.startEphemeral = ephemeralStarts(pod, v)
	initialized, failed := computeInitActions(pod, v, &a)
	if failed {
		a.initFailed, a.killPod, a.startInit, a.kill = true, true, nil, nil
		return a
	}
	if !initialized {
		return a
	}
	keep := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		latest := v.latest(c.Name)
		if latest == nil || latest.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
			if shouldRestart(pod, typeApp, latest) {
				if latest != nil && latest.state == runtimeapi.ContainerState_CONTAINER_UNKNOWN {
					a.kill = append(a.kill, killAction{inst: *latest, container: c,
						message: fmt.Sprintf("Container %s is in %q state, try killing it before restart", c.Name, "unknown")})
				}
				a.start = append(a.start, newStart(c, typeApp, v))
			}
			continue
		}
		if latest.hash != containerHash(c) {
			a.kill = append(a.kill, killAction{inst: *latest, container: c,
				message: fmt.Sprintf("Container %s definition changed, will be restarted", c.Name)})
			s := newStart(c, typeApp, v)
			s.noBackOff = true
			a.start = append(a.start, s)
			continue
		}
		if a.resizeRunning(pod, c, latest) {
			s := newStart(c, typeApp, v)
			s.noBackOff = true
			a.start = append(a.start, s)
			continue
		}
		keep++
	}
	if keep == 0 && len(a.start) == 0 {
		// Every app container has stopped for good: so does the pod (its sidecars too).
		a.killPod, a.startInit = true, nil
	}
	return a
}

// resizeRunning adds what a running instance of c needs to run with c's resources
// (resizeOf): an update in place, or a kill when its resize policy restarts it, which the
// caller follows with a start; restart says which.
func (a *podActions) resizeRunning(pod *corev1.Pod, c *corev1.Container, latest *instance) (restart bool) {
	update, restart := resizeOf(pod, c, latest)
	switch {
	case restart:
		a.kill = append(a.kill, killAction{inst: *latest, container: c, message: resizeMessage(c)})
	case update:
		a.resize = append(a.resize, resizeAction{inst: *latest, container: c})
	}
	return restart
}

// sandboxActions decides for a pod without a ready sandbox: create one (again) unless the
// pod has nothing left to run.
func sandboxActions(pod *corev1.Pod, v *podView) podActions {
	var a podActions
	if len(v.sandboxes) > 0 {
		a.attempt = v.sandboxes[0].attempt + 1
		a.killPod = true // whatever still runs in the old sandbox
		if pod.Spec.RestartPolicy == corev1.RestartPolicyNever && v.hasContainers() {
			return a // its containers ran: a Never pod does not start over
		}
	}
	var start []startAction
	allRan := true
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		latest := v.latest(c.Name)
		if latest == nil {
			allRan = false
		}
		if pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure && latest != nil && latest.exited() && latest.exitCode == 0 {
			continue
		}
		start = append(start, newStart(c, typeApp, v))
	}
	if len(start) == 0 && allRan {
		return a // every container succeeded
	}
	a.createSandbox = true
	a.sandboxChanged = len(v.sandboxes) > 0
	a.purgeInit = len(v.sandboxes) > 0
	if len(pod.Spec.InitContainers) > 0 {
		c := &pod.Spec.InitContainers[0]
		a.startInit = []startAction{{container: c, ctype: initType(c)}} // init containers start over
		return a
	}
	a.start = start
	return a
}

// computeInitActions adds the init containers' actions and says whether the pod is
// initialized (its app containers may run) or failed (an init container failed and the
// pod's restartPolicy is Never).
//
// Init containers run one at a time in order: the next starts when the previous exited 0
// or, for a sidecar, once the previous is running. A failed init container is restarted
// (after its back-off) unless restartPolicy is Never. Once an app container exists the
// pod is initialized for good and only the sidecars are kept running.
func computeInitActions(pod *corev1.Pod, v *podView, a *podActions) (initialized, failed bool) {
	inits := pod.Spec.InitContainers
	n := len(inits)
	if n == 0 {
		return true, false
	}
	keepSidecar := func(i int) {
		c := &inits[i]
		if !isSidecar(c) {
			return
		}
		latest := v.latest(c.Name)
		switch {
		case latest == nil || latest.state != runtimeapi.ContainerState_CONTAINER_RUNNING:
			a.startInit = append(a.startInit, newStart(c, typeSidecar, v))
		case latest.hash != containerHash(c):
			a.kill = append(a.kill, killAction{inst: *latest, container: c,
				message: fmt.Sprintf("Container %s definition changed, will be restarted", c.Name)})
			s := newStart(c, typeSidecar, v)
			s.noBackOff = true
			a.startInit = append(a.startInit, s)
		case a.resizeRunning(pod, c, latest):
			s := newStart(c, typeSidecar, v)
			s.noBackOff = true
			a.startInit = append(a.startInit, s)
		}
	}
	if appContainerCreated(pod, v) {
		for i := range inits {
			keepSidecar(i)
		}
		return true, false
	}
	last := -1
	for i := n - 1; i >= 0; i-- {
		if v.latest(inits[i].Name) != nil {
			last = i
			break
		}
	}
	for i := 0; i < last; i++ {
		keepSidecar(i) // sidecars started earlier keep running during initialization
	}
	if last < 0 {
		c := &inits[0]
		a.startInit = append(a.startInit, newStart(c, initType(c), v))
		return false, false
	}
	c := &inits[last]
	latest := v.latest(c.Name)
	next := func() bool {
		if last == n-1 {
			return true
		}
		nc := &inits[last+1]
		a.startInit = append(a.startInit, newStart(nc, initType(nc), v))
		return false
	}
	switch {
	case latest.state == runtimeapi.ContainerState_CONTAINER_CREATED:
		a.startInit = append(a.startInit, newStart(c, initType(c), v)) // it never started: again
		return false, false
	case latest.state == runtimeapi.ContainerState_CONTAINER_RUNNING:
		if !isSidecar(c) {
			// Resized in place while it runs (it is never restarted for a resize).
			if update, restart := resizeOf(pod, c, latest); update || restart {
				a.resize = append(a.resize, resizeAction{inst: *latest, container: c})
			}
			return false, false // wait for it to finish
		}
		keepSidecar(last)
		return next(), false
	case isSidecar(c):
		a.startInit = append(a.startInit, newStart(c, typeSidecar, v))
		return false, false
	case initFailed(latest):
		if pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
			return false, true
		}
		a.startInit = append(a.startInit, newStart(c, typeInit, v))
		return false, false
	}
	return next(), false
}

// appContainerCreated says whether an app container exists in a state other than exited:
// the pod was initialized.
func appContainerCreated(pod *corev1.Pod, v *podView) bool {
	for _, c := range pod.Spec.Containers {
		if l := v.latest(c.Name); l != nil && !l.exited() {
			return true
		}
	}
	return false
}

// gcActions picks the instances to remove: per container, everything but the newest
// instance and, when that one is not exited, the newest exited one (the previous run the
// status reports); running instances are never removed here. Sandboxes that are not ready,
// not the newest and hold no container left are removed too.
func gcActions(v *podView) (containers []instance, sandboxes []string) {
	used := map[string]bool{}
	for _, is := range v.containers {
		keptExited := false
		for i, in := range is {
			switch {
			case i == 0:
				keptExited = in.exited()
			case in.state == runtimeapi.ContainerState_CONTAINER_RUNNING || in.state == runtimeapi.ContainerState_CONTAINER_UNKNOWN:
			case in.exited() && !keptExited:
				keptExited = true
			default:
				containers = append(containers, in)
				continue
			}
			used[in.sandboxID] = true
		}
	}
	for i, s := range v.sandboxes {
		if i > 0 && !s.ready && !used[s.id] {
			sandboxes = append(sandboxes, s.id)
		}
	}
	return containers, sandboxes
}
