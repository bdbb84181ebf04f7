package kubelet

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A pod with init containers reads as upstream's kubelet reports it at each step: every
// container not yet run waits with PodInitializing, init containers that succeeded are
// ready, and the Initialized condition names the init containers not done.
func TestInitContainerStatuses(t *testing.T) {
	t0 := time.Unix(5000, 0)
	now := metav1.NewTime(t0.Add(time.Minute))
	pod := func(policy corev1.RestartPolicy) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: policy,
			InitContainers: []corev1.Container{{Name: "init1", Image: "busybox"}, {Name: "init2", Image: "busybox"}},
			Containers:     []corev1.Container{{Name: "run1", Image: "pause"}}}}
	}
	done := func(name string, code int32) ContainerState {
		reason := "Completed"
		if code != 0 {
			reason = "Error"
		}
		return ContainerState{Name: name, ContainerID: "containerd://" + name, Terminated: true, ExitCode: code, Reason: reason,
			StartedAt: t0, FinishedAt: t0.Add(time.Second)}
	}
	running := func(name string) ContainerState {
		return ContainerState{Name: name, ContainerID: "containerd://" + name, StartedAt: t0}
	}
	crashLooping := done("init1", 1)
	crashLooping.RestartCount = 3
	last := done("init1", 1)
	crashLooping.LastTerminated = &last
	crashLooping.Terminated, crashLooping.Waiting = false, true
	crashLooping.Reason, crashLooping.Message = "CrashLoopBackOff", "back-off 40s restarting failed container=init1"
	creating := ContainerState{Name: "init1", ContainerID: "containerd://init1", Waiting: true, Reason: "ContainerCreating"}

	type cond struct {
		status          corev1.ConditionStatus
		reason, message string
	}
	for _, tc := range []struct {
		name   string
		policy corev1.RestartPolicy
		states []ContainerState // nil: the pending status (no sandbox yet)
		phase  corev1.PodPhase
		// waiting is the reason each container waits with ("" for one that does not wait).
		waiting     map[string]string
		ready       map[string]bool
		initialized cond
		readyCond   cond
	}{
		{name: "pending", policy: corev1.RestartPolicyAlways, phase: corev1.PodPending,
			waiting:     map[string]string{"init1": "PodInitializing", "init2": "PodInitializing", "run1": "PodInitializing"},
			initialized: cond{corev1.ConditionFalse, "ContainersNotInitialized", "containers with incomplete status: [init1 init2]"},
			readyCond:   cond{corev1.ConditionFalse, "ContainersNotReady", "containers with unready status: [run1]"}},
		{name: "first init container created", policy: corev1.RestartPolicyNever, phase: corev1.PodPending,
			states:      []ContainerState{creating},
			waiting:     map[string]string{"init1": "PodInitializing", "init2": "PodInitializing", "run1": "PodInitializing"},
			initialized: cond{corev1.ConditionFalse, "ContainersNotInitialized", "containers with incomplete status: [init1 init2]"},
			readyCond:   cond{corev1.ConditionFalse, "ContainersNotReady", "containers with unready status: [run1]"}},
		{name: "first init container running", policy: corev1.RestartPolicyNever, phase: corev1.PodPending,
			states:      []ContainerState{running("init1")},
			waiting:     map[string]string{"init2": "PodInitializing", "run1": "PodInitializing"},
			initialized: cond{corev1.ConditionFalse, "ContainersNotInitialized", "containers with incomplete status: [init1 init2]"},
			readyCond:   cond{corev1.ConditionFalse, "ContainersNotReady", "containers with unready status: [run1]"}},
		{name: "never: all succeeded", policy: corev1.RestartPolicyNever, phase: corev1.PodSucceeded,
			states:      []ContainerState{done("init1", 0), done("init2", 0), done("run1", 0)},
			ready:       map[string]bool{"init1": true, "init2": true},
			initialized: cond{corev1.ConditionTrue, "PodCompleted", ""},
			readyCond:   cond{corev1.ConditionFalse, "PodCompleted", ""}},
		{name: "always: initialized and running", policy: corev1.RestartPolicyAlways, phase: corev1.PodRunning,
			states:      []ContainerState{done("init1", 0), done("init2", 0), running("run1")},
			ready:       map[string]bool{"init1": true, "init2": true, "run1": true},
			initialized: cond{corev1.ConditionTrue, "", ""},
			readyCond:   cond{corev1.ConditionTrue, "", ""}},
		{name: "always: first init container crash-looping", policy: corev1.RestartPolicyAlways, phase: corev1.PodPending,
			states:      []ContainerState{crashLooping},
			waiting:     map[string]string{"init1": "CrashLoopBackOff", "init2": "PodInitializing", "run1": "PodInitializing"},
			initialized: cond{corev1.ConditionFalse, "ContainersNotInitialized", "containers with incomplete status: [init1 init2]"},
			readyCond:   cond{corev1.ConditionFalse, "ContainersNotReady", "containers with unready status: [run1]"}},
		{name: "never: second init container failed", policy: corev1.RestartPolicyNever, phase: corev1.PodFailed,
			states:      []ContainerState{done("init1", 0), done("init2", 1)},
			waiting:     map[string]string{"run1": "PodInitializing"},
			ready:       map[string]bool{"init1": true},
			initialized: cond{corev1.ConditionFalse, "ContainersNotInitialized", "containers with incomplete status: [init2]"},
			readyCond:   cond{corev1.ConditionFalse, "PodFailed", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pod(tc.policy)
			var s corev1.PodStatus
			if tc.states == nil {
				s = pendingStatus(p, "172.31.0.1", now)
			} else {
				s = runtimeStatus(p, tc.states, "172.31.0.1", "10.244.0.5", true, now)
			}
			if s.Phase != tc.phase {
				t.Errorf("phase %s, want %s", s.Phase, tc.phase)
			}
			if len(s.InitContainerStatuses) != 2 || len(s.ContainerStatuses) != 1 ||
				s.InitContainerStatuses[0].Name != "init1" || s.InitContainerStatuses[1].Name != "init2" {
				t.Fatalf("statuses %+v %+v", s.InitContainerStatuses, s.ContainerStatuses)
			}
			for _, cs := range append(append([]corev1.ContainerStatus(nil), s.InitContainerStatuses...), s.ContainerStatuses...) {
				got := ""
				if cs.State.Waiting != nil {
					got = cs.State.Waiting.Reason
				}
				if got != tc.waiting[cs.Name] {
					t.Errorf("%s waits with %q, want %q (state %+v)", cs.Name, got, tc.waiting[cs.Name], cs.State)
				}
				if cs.Ready != tc.ready[cs.Name] {
					t.Errorf("%s ready %v, want %v", cs.Name, cs.Ready, tc.ready[cs.Name])
				}
			}
			if init1 := s.InitContainerStatuses[0]; tc.name == "always: first init container crash-looping" &&
				(init1.RestartCount != 3 || init1.LastTerminationState.Terminated == nil || init1.LastTerminationState.Terminated.ExitCode != 1) {
				t.Errorf("crash-looping init1: restartCount %d lastState %+v", init1.RestartCount, init1.LastTerminationState)
			}
			conds := map[corev1.PodConditionType]corev1.PodCondition{}
			for _, c := range s.Conditions {
				conds[c.Type] = c
			}
			for typ, want := range map[corev1.PodConditionType]cond{corev1.PodInitialized: tc.initialized, corev1.PodReady: tc.readyCond, corev1.ContainersReady: tc.readyCond} {
				c := conds[typ]
				if (cond{c.Status, c.Reason, c.Message}) != want {
					t.Errorf("%s: %s %q %q, want %+v", typ, c.Status, c.Reason, c.Message, want)
				}
				if c.LastTransitionTime.IsZero() {
					t.Errorf("%s has no transition time", typ)
				}
			}
		})
	}
}

// A container the runtime no longer holds keeps its terminated status, and one that waits
// again keeps its restart count and last state.
func TestUnknownContainerKeepsStatus(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}, {Name: "b"}}}}
	term := &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}
	prev := []corev1.ContainerStatus{
		{Name: "a", RestartCount: 4, State: corev1.ContainerState{Terminated: term}},
		{Name: "b", RestartCount: 2, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			LastTerminationState: corev1.ContainerState{Terminated: term}},
	}
	got := containerStatuses(p, p.Spec.Containers, nil, prev, false)
	if got[0].State.Terminated == nil || got[0].RestartCount != 4 {
		t.Errorf("a: %+v", got[0])
	}
	if w := got[1].State.Waiting; w == nil || w.Reason != "ContainerCreating" || got[1].RestartCount != 2 || got[1].LastTerminationState.Terminated == nil {
		t.Errorf("b: %+v", got[1])
	}
}

// Ready waits for the pod's readiness gates; the conditions of others are kept.
func TestReadinessGates(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}},
		ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}}}}
	states := []ContainerState{{Name: "a", StartedAt: time.Unix(1, 0)}}
	now := metav1.NewTime(time.Unix(100, 0))
	ready := func(s corev1.PodStatus) (corev1.PodCondition, corev1.PodCondition) {
		var r, cr corev1.PodCondition
		for _, c := range s.Conditions {
			switch c.Type {
			case corev1.PodReady:
				r = c
			case corev1.ContainersReady:
				cr = c
			}
		}
		return r, cr
	}
	r, cr := ready(runtimeStatus(p, states, "", "", true, now))
	if r.Status != corev1.ConditionFalse || r.Reason != "ReadinessGatesNotReady" || cr.Status != corev1.ConditionTrue {
		t.Errorf("gate missing: Ready %+v ContainersReady %+v", r, cr)
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: "example.com/lb", Status: corev1.ConditionTrue}}
	s := runtimeStatus(p, states, "", "", true, now)
	if r, _ := ready(s); r.Status != corev1.ConditionTrue {
		t.Errorf("gate true: Ready %+v", r)
	}
	if s.Conditions[0].Type != "example.com/lb" {
		t.Errorf("gate's condition not kept: %+v", s.Conditions)
	}
}
