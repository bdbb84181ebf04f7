package kubelet

import (
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/util/podutil"
)

// podConditions sets the kubelet's conditions (keeping the others, e.g. PodScheduled and
// DisruptionTarget) with transition times that only move when the status changes.
func podConditions(prev []corev1.PodCondition, ready bool, initialized bool, sandbox bool, now metav1.Time) []corev1.PodCondition {
	b := func(v bool) corev1.ConditionStatus {
		if v {
			return corev1.ConditionTrue
		}
		return corev1.ConditionFalse
	}
	want := []corev1.PodCondition{
		{Type: corev1.PodReadyToStartContainers, Status: b(sandbox)},
		{Type: corev1.PodInitialized, Status: b(initialized)},
		{Type: corev1.PodReady, Status: b(ready)},
		{Type: corev1.ContainersReady, Status: b(ready)},
	}
	for i := range want {
		if want[i].Status == corev1.ConditionFalse && want[i].Type != corev1.PodReadyToStartContainers && want[i].Type != corev1.PodInitialized {
			want[i].Reason = "ContainersNotReady"
		}
		want[i].LastTransitionTime = now
		for _, p := range prev {
			if p.Type == want[i].Type && p.Status == want[i].Status {
				want[i].LastTransitionTime = p.LastTransitionTime
			}
		}
	}
	out := make([]corev1.PodCondition, 0, len(prev)+len(want))
	for _, p := range prev {
		mine := false
		for _, w := range want {
			if w.Type == p.Type {
				mine = true
			}
		}
		if !mine {
			out = append(out, p)
		}
	}
	return append(out, want...)
}

func ipList(ip string) (string, []corev1.PodIP) {
	if ip == "" {
		return "", nil
	}
	return ip, []corev1.PodIP{{IP: ip}}
}

func hostIPs(ip string) []corev1.HostIP {
	if ip == "" {
		return nil
	}
	return []corev1.HostIP{{IP: ip}}
}

// pendingStatus: the pod is on the node but its containers are not created yet (volumes).
func pendingStatus(pod *corev1.Pod, hostIP string, now metav1.Time) corev1.PodStatus {
	s := *pod.Status.DeepCopy()
	s.Phase = corev1.PodPending
	s.HostIP, s.HostIPs = hostIP, hostIPs(hostIP)
	if s.StartTime == nil {
		s.StartTime = &now
	}
	s.QOSClass = podutil.ComputeQOSClass(pod)
	s.Conditions = podConditions(s.Conditions, false, len(pod.Spec.InitContainers) == 0, false, now)
	s.InitContainerStatuses = waitingStatuses(pod.Spec.InitContainers, "PodInitializing")
	s.ContainerStatuses = waitingStatuses(pod.Spec.Containers, "ContainerCreating")
	if len(pod.Spec.InitContainers) > 0 {
		s.ContainerStatuses = waitingStatuses(pod.Spec.Containers, "PodInitializing")
	}
	return s
}

func waitingStatuses(cs []corev1.Container, reason string) []corev1.ContainerStatus {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, 0, len(cs))
	for _, c := range cs {
		out = append(out, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Started: new(bool),
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}})
	}
	return out
}

// runtimeStatus is the pod's status from its containers' states: the phase, the
// conditions, the container statuses. sandbox says whether the pod's sandbox runs.
func runtimeStatus(pod *corev1.Pod, states []ContainerState, hostIP, podIP string, sandbox bool, now metav1.Time) corev1.PodStatus {
	s := *pod.Status.DeepCopy()
	s.Phase = podPhase(pod, states)
	s.Reason, s.Message = "", ""
	s.HostIP, s.HostIPs = hostIP, hostIPs(hostIP)
	s.PodIP, s.PodIPs = ipList(podIP)
	if s.StartTime == nil {
		s.StartTime = &now
	}
	s.QOSClass = podutil.ComputeQOSClass(pod)
	initialized := initDone(pod, states)
	ready := initialized && s.Phase == corev1.PodRunning && allRunning(pod.Spec.Containers, states) && probesReady(states)
	s.Conditions = podConditions(s.Conditions, ready, initialized, sandbox, now)
	s.InitContainerStatuses = containerStatuses(pod.Spec.InitContainers, states)
	s.ContainerStatuses = containerStatuses(pod.Spec.Containers, states)
	if !initialized {
		for i := range s.ContainerStatuses {
			if w := s.ContainerStatuses[i].State.Waiting; w != nil && w.Reason == "ContainerCreating" {
				w.Reason = "PodInitializing"
			}
		}
	}
	return s
}

// runningStatus: every container started, the pod Running and Ready (hollow pods).
func runningStatus(pod *corev1.Pod, states []ContainerState, hostIP, podIP string, now metav1.Time) corev1.PodStatus {
	return runtimeStatus(pod, states, hostIP, podIP, true, now)
}

// initDone says whether every init container has completed successfully.
func initDone(pod *corev1.Pod, states []ContainerState) bool {
	byName := statesByName(states)
	for _, c := range pod.Spec.InitContainers {
		st, ok := byName[c.Name]
		switch {
		case !ok:
			return false
		case isSidecar(c):
			if st.Terminated || st.Waiting && st.LastTerminated == nil || st.Started != nil && !*st.Started {
				return false // a sidecar counts once it has started (its startup probe passed)
			}
		case !st.Terminated || st.ExitCode != 0:
			return false
		}
	}
	return true
}

// isSidecar: an init container with restartPolicy Always keeps running beside the app.
func isSidecar(c corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// allRunning says whether every container of cs runs.
func allRunning(cs []corev1.Container, states []ContainerState) bool {
	byName := statesByName(states)
	for _, c := range cs {
		st, ok := byName[c.Name]
		if !ok || st.Terminated || st.Waiting {
			return false
		}
	}
	return true
}

// probesReady says whether no app container or sidecar is held back by its probes (not
// started, or not ready).
func probesReady(states []ContainerState) bool {
	for _, st := range states {
		if st.Ready != nil && !*st.Ready && !st.Terminated && !st.Waiting {
			return false
		}
	}
	return true
}

func statesByName(states []ContainerState) map[string]ContainerState {
	byName := make(map[string]ContainerState, len(states))
	for _, s := range states {
		byName[s.Name] = s
	}
	return byName
}

// podPhase is the pod's phase from its containers, by upstream's rules: Pending until the
// init containers are done and every app container has run once; Running while one runs
// or will be restarted; Succeeded or Failed once all have stopped for good.
func podPhase(pod *corev1.Pod, states []ContainerState) corev1.PodPhase {
	byName := statesByName(states)
	if !initDone(pod, states) {
		if pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
			for _, c := range pod.Spec.InitContainers {
				if st, ok := byName[c.Name]; ok && st.Terminated && st.ExitCode != 0 {
					return corev1.PodFailed
				}
			}
		}
		return corev1.PodPending
	}
	var running, waiting, stopped, succeeded int
	for _, c := range pod.Spec.Containers {
		st, ok := byName[c.Name]
		switch {
		case !ok:
			waiting++
		case st.Waiting && st.LastTerminated != nil:
			stopped++ // restarting after it ran
			if st.LastTerminated.ExitCode == 0 {
				succeeded++
			}
		case st.Waiting:
			waiting++
		case st.Terminated:
			stopped++
			if st.ExitCode == 0 {
				succeeded++
			}
		default:
			running++
		}
	}
	switch {
	case waiting > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case stopped > 0:
		switch {
		case pod.Spec.RestartPolicy == corev1.RestartPolicyAlways:
			return corev1.PodRunning
		case stopped == succeeded:
			return corev1.PodSucceeded
		case pod.Spec.RestartPolicy == corev1.RestartPolicyNever:
			return corev1.PodFailed
		}
		return corev1.PodRunning
	}
	return corev1.PodPending
}

// terminatedStatus: the pod was deleted and its containers stopped; a terminal phase, as
// upstream's kubelet reports before the final delete.
func terminatedStatus(pod *corev1.Pod, states []ContainerState, now metav1.Time) corev1.PodStatus {
	s := *pod.Status.DeepCopy()
	s.Phase = corev1.PodSucceeded
	for _, st := range states {
		if st.ExitCode != 0 {
			s.Phase = corev1.PodFailed
		}
	}
	s.Conditions = podConditions(s.Conditions, false, true, false, now)
	if len(states) > 0 {
		s.InitContainerStatuses = containerStatuses(pod.Spec.InitContainers, states)
		s.ContainerStatuses = containerStatuses(pod.Spec.Containers, states)
	}
	return s
}

func containerStatuses(cs []corev1.Container, states []ContainerState) []corev1.ContainerStatus {
	if len(cs) == 0 {
		return nil
	}
	byName := statesByName(states)
	out := make([]corev1.ContainerStatus, 0, len(cs))
	for _, c := range cs {
		st, ok := byName[c.Name]
		if !ok {
			out = append(out, waitingStatuses([]corev1.Container{c}, "ContainerCreating")...)
			continue
		}
		image := st.Image
		if image == "" {
			image = c.Image
		}
		cs := corev1.ContainerStatus{Name: c.Name, Image: image, ImageID: st.ImageID, ContainerID: st.ContainerID,
			RestartCount: st.RestartCount}
		started := !st.Terminated && !st.Waiting && (st.Started == nil || *st.Started)
		cs.Started = &started
		switch {
		case st.Waiting:
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: st.Reason, Message: st.Message}
		case st.Terminated:
			cs.State.Terminated = terminatedState(st)
		default:
			cs.Ready = st.Ready == nil || *st.Ready
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(st.StartedAt)}
		}
		if st.LastTerminated != nil {
			cs.LastTerminationState.Terminated = terminatedState(*st.LastTerminated)
		}
		out = append(out, cs)
	}
	return out
}

func terminatedState(st ContainerState) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{ExitCode: st.ExitCode, Reason: st.Reason, Message: st.Message,
		StartedAt: metav1.NewTime(st.StartedAt), FinishedAt: metav1.NewTime(st.FinishedAt), ContainerID: st.ContainerID}
}

// statusEqual ignores nothing: a write is skipped only when the status is the same.
func statusEqual(a, b *corev1.PodStatus) bool { return apiequality.Semantic.DeepEqual(a, b) }
