package kubelet

import (
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// qosClass is upstream's QoS class of a pod.
func qosClass(pod *corev1.Pod) corev1.PodQOSClass {
	any, guaranteed := false, true
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, hasReq := c.Resources.Requests[r]
			lim, hasLim := c.Resources.Limits[r]
			if hasReq || hasLim {
				any = true
			}
			if !hasLim || (hasReq && req.Cmp(lim) != 0) {
				guaranteed = false
			}
		}
	}
	switch {
	case !any:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
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
	s.QOSClass = qosClass(pod)
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

// runningStatus: containers started, pod Running and Ready.
func runningStatus(pod *corev1.Pod, states []ContainerState, hostIP, podIP string, now metav1.Time) corev1.PodStatus {
	s := *pod.Status.DeepCopy()
	s.Phase = corev1.PodRunning
	s.Reason, s.Message = "", ""
	s.HostIP, s.HostIPs = hostIP, hostIPs(hostIP)
	s.PodIP, s.PodIPs = ipList(podIP)
	if s.StartTime == nil {
		s.StartTime = &now
	}
	s.QOSClass = qosClass(pod)
	s.Conditions = podConditions(s.Conditions, true, true, true, now)
	s.InitContainerStatuses = containerStatuses(pod.Spec.InitContainers, states)
	s.ContainerStatuses = containerStatuses(pod.Spec.Containers, states)
	return s
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
	byName := map[string]ContainerState{}
	for _, s := range states {
		byName[s.Name] = s
	}
	out := make([]corev1.ContainerStatus, 0, len(cs))
	for _, c := range cs {
		st, ok := byName[c.Name]
		if !ok {
			out = append(out, waitingStatuses([]corev1.Container{c}, "ContainerCreating")...)
			continue
		}
		cs := corev1.ContainerStatus{Name: c.Name, Image: st.Image, ImageID: st.ImageID, ContainerID: st.ContainerID}
		started := !st.Terminated
		cs.Started = &started
		if st.Terminated {
			cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: st.ExitCode, Reason: st.Reason,
				StartedAt: metav1.NewTime(st.StartedAt), FinishedAt: metav1.NewTime(st.FinishedAt), ContainerID: st.ContainerID}
		} else {
			cs.Ready = true
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(st.StartedAt)}
		}
		out = append(out, cs)
	}
	return out
}

// statusEqual ignores nothing: a write is skipped only when the status is the same.
func statusEqual(a, b *corev1.PodStatus) bool { return apiequality.Semantic.DeepEqual(a, b) }
