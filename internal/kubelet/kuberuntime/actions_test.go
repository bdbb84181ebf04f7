package kuberuntime

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// actionSummary is podActions in words: starts as name@attempt (+"!" without back-off,
// "~" when it waits for the back-off of an exited instance), kills as names.
type actionSummary struct {
	create, changed, killPod, purge, initFailed bool
	attempt                                     uint32
	startInit, start, kill                      []string
}

func summarize(a podActions) actionSummary {
	s := actionSummary{create: a.createSandbox, changed: a.sandboxChanged, killPod: a.killPod, purge: a.purgeInit,
		initFailed: a.initFailed, attempt: a.attempt}
	f := func(st startAction) string {
		out := fmt.Sprintf("%s@%d", st.container.Name, st.attempt)
		if st.noBackOff {
			out += "!"
		}
		if st.last != nil {
			out += "~"
		}
		return out
	}
	for _, st := range a.startInit {
		s.startInit = append(s.startInit, f(st))
	}
	for _, st := range a.start {
		s.start = append(s.start, f(st))
	}
	for _, k := range a.kill {
		s.kill = append(s.kill, k.inst.name)
	}
	return s
}

func TestComputePodActions(t *testing.T) {
	changed := func(pod *corev1.Pod, name string) *corev1.Pod {
		p := pod.DeepCopy()
		spec(p, name).Image = "busybox:1.37"
		return p
	}
	deleting := testPod(corev1.RestartPolicyAlways, nil, "app")
	deleting.DeletionTimestamp = &metav1.Time{}
	notReady := []sandbox{{id: "sb1", attempt: 1, ready: false}, {id: "sb0", attempt: 0}}

	tests := []struct {
		name string
		pod  *corev1.Pod
		sbs  []sandbox
		ins  []instance
		want actionSummary
	}{
		{name: "new pod: sandbox and app containers",
			pod:  testPod(corev1.RestartPolicyAlways, nil, "a", "b"),
			sbs:  []sandbox{},
			want: actionSummary{create: true, start: []string{"a@0", "b@0"}}},
		{name: "new pod with init containers: only the first init container",
			pod:  testPod(corev1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
			sbs:  []sandbox{},
			want: actionSummary{create: true, startInit: []string{"i1@0"}}},
		{name: "ready sandbox, nothing ran yet",
			pod:  testPod(corev1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
			want: actionSummary{startInit: []string{"i1@0"}}},
		{name: "init container running: wait",
			pod:  testPod(corev1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
			ins:  []instance{inst("i1", 0, running, 0)},
			want: actionSummary{}},
		{name: "first init container done: the next one",
			pod:  testPod(corev1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
			ins:  []instance{inst("i1", 0, exited, 0)},
			want: actionSummary{startInit: []string{"i2@0"}}},
		{name: "last init container done: app containers",
			pod:  testPod(corev1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
			ins:  []instance{inst("i1", 0, exited, 0), inst("i2", 0, exited, 0)},
			want: actionSummary{start: []string{"a@0"}}},
		{name: "init container failed: restarted after its back-off",
			pod:  testPod(corev1.RestartPolicyOnFailure, []string{"i1"}, "a"),
			ins:  []instance{inst("i1", 0, exited, 1)},
			want: actionSummary{startInit: []string{"i1@1~"}}},
		{name: "init container failed under Never: the pod fails",
			pod:  testPod(corev1.RestartPolicyNever, []string{"i1", "i2"}, "a"),
			ins:  []instance{inst("i1", 0, exited, 2)},
			want: actionSummary{initFailed: true, killPod: true}},
		{name: "init container created but never started: again",
			pod:  testPod(corev1.RestartPolicyAlways, []string{"i1"}, "a"),
			ins:  []instance{inst("i1", 0, created, 0)},
			want: actionSummary{startInit: []string{"i1@1"}}},
		{name: "sidecar first",
			pod:  testPod(corev1.RestartPolicyAlways, []string{"side", "i2"}, "a"),
			want: actionSummary{startInit: []string{"side@0"}}},
		{name: "sidecar running: the next init container",
			pod:  testPod(corev1.RestartPolicyAlways, []string{"side", "i2"}, "a"),
			ins:  []instance{inst("side", 0, running, 0)},
			want: actionSummary{startInit: []string{"i2@0"}}},
		{name: "sidecar running and init done: app containers",
			pod:  testPod(corev1.RestartPolicyAlways, []string{"side", "i2"}, "a"),
			ins:  []instance{inst("side", 0, running, 0), inst("i2", 0, exited, 0)},
			want: actionSummary{start: []string{"a@0"}}},
		{name: "last init container is a running sidecar: app containers",
			pod:  testPod(corev1.RestartPolicyNever, []string{"i1", "side"}, "a"),
			ins:  []instance{inst("i1", 0, exited, 0), inst("side", 0, running, 0)},
			want: actionSummary{start: []string{"a@0"}}},
		{name: "sidecar crashed during initialization: restarted, later ones wait",
			pod:  testPod(corev1.RestartPolicyNever, []string{"side", "i2"}, "a"),
			ins:  []instance{inst("side", 0, exited, 1)},
			want: actionSummary{startInit: []string{"side@1~"}}},
		{name: "sidecar crashed while a later init container runs: restarted",
			pod:  testPod(corev1.RestartPolicyAlways, []string{"side", "i2"}, "a"),
			ins:  []instance{inst("side", 0, exited, 1), inst("i2", 0, running, 0)},
			want: actionSummary{startInit: []string{"side@1~"}}},
		{name: "sidecar crashed after initialization: restarted, apps untouched",
			pod:  testPod(corev1.RestartPolicyNever, []string{"side"}, "a"),
			ins:  []instance{inst("side", 0, exited, 0), inst("a", 0, running, 0)},
			want: actionSummary{startInit: []string{"side@1~"}}},
		{name: "app containers running: nothing to do",
			pod:  testPod(corev1.RestartPolicyAlways, []string{"i1"}, "a"),
			ins:  []instance{inst("i1", 0, exited, 0), inst("a", 0, running, 0)},
			want: actionSummary{}},
		{name: "init container instances gone after initialization: not rerun",
			pod:  testPod(corev1.RestartPolicyAlways, []string{"i1"}, "a"),
			ins:  []instance{inst("a", 0, running, 0)},
			want: actionSummary{}},
		{name: "crashed app container under Always: restarted",
			pod:  testPod(corev1.RestartPolicyAlways, nil, "a", "b"),
			ins:  []instance{inst("a", 3, exited, 0), inst("b", 0, running, 0)},
			want: actionSummary{start: []string{"a@4~"}}},
		{name: "OnFailure: a failed container is restarted",
			pod:  testPod(corev1.RestartPolicyOnFailure, nil, "a", "b"),
			ins:  []instance{inst("a", 0, exited, 1), inst("b", 0, running, 0)},
			want: actionSummary{start: []string{"a@1~"}}},
		{name: "OnFailure: every container succeeded, the pod stops",
			pod:  testPod(corev1.RestartPolicyOnFailure, nil, "a"),
			ins:  []instance{inst("a", 0, exited, 0)},
			want: actionSummary{killPod: true}},
		{name: "Never: exited containers stay, the pod stops when all did",
			pod:  testPod(corev1.RestartPolicyNever, nil, "a", "b"),
			ins:  []instance{inst("a", 0, exited, 1), inst("b", 0, exited, 0)},
			want: actionSummary{killPod: true}},
		{name: "Never: one still running keeps the pod",
			pod:  testPod(corev1.RestartPolicyNever, nil, "a", "b"),
			ins:  []instance{inst("a", 0, exited, 1), inst("b", 0, running, 0)},
			want: actionSummary{}},
		{name: "spec changed: killed and recreated without back-off",
			pod:  changed(testPod(corev1.RestartPolicyAlways, nil, "a"), "a"),
			ins:  []instance{{name: "a", state: running, hash: containerHash(spec(testPod(corev1.RestartPolicyAlways, nil, "a"), "a"))}},
			want: actionSummary{kill: []string{"a"}, start: []string{"a@1!"}}},
		{name: "container stuck in created: a new instance",
			pod:  testPod(corev1.RestartPolicyAlways, nil, "a"),
			ins:  []instance{inst("a", 0, created, 0)},
			want: actionSummary{start: []string{"a@1"}}},
		{name: "container in unknown state: killed, then started again",
			pod:  testPod(corev1.RestartPolicyNever, nil, "a"),
			ins:  []instance{inst("a", 0, unknown, 0)},
			want: actionSummary{kill: []string{"a"}, start: []string{"a@1"}}},
		{name: "sandbox died: a new one, init containers start over",
			pod:  testPod(corev1.RestartPolicyAlways, []string{"i1"}, "a"),
			sbs:  notReady,
			ins:  []instance{inst("i1", 0, exited, 0), inst("a", 2, running, 0)},
			want: actionSummary{create: true, changed: true, killPod: true, purge: true, attempt: 2, startInit: []string{"i1@0"}}},
		{name: "sandbox died without init containers: app containers in the new one",
			pod:  testPod(corev1.RestartPolicyAlways, nil, "a"),
			sbs:  notReady,
			ins:  []instance{inst("a", 2, exited, 137)},
			want: actionSummary{create: true, changed: true, killPod: true, purge: true, attempt: 2, start: []string{"a@3~"}}},
		{name: "sandbox stopped after a Never pod ran: not recreated",
			pod:  testPod(corev1.RestartPolicyNever, nil, "a"),
			sbs:  notReady,
			ins:  []instance{inst("a", 0, exited, 0)},
			want: actionSummary{killPod: true, attempt: 2}},
		{name: "sandbox stopped after an OnFailure pod succeeded: not recreated",
			pod:  testPod(corev1.RestartPolicyOnFailure, nil, "a"),
			sbs:  notReady,
			ins:  []instance{inst("a", 0, exited, 0)},
			want: actionSummary{killPod: true, attempt: 2}},
		{name: "pod being deleted: nothing starts",
			pod:  deleting,
			ins:  []instance{inst("app", 0, exited, 1)},
			want: actionSummary{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := viewOf{pod: tt.pod, sandboxes: tt.sbs, insts: tt.ins}.build()
			got := summarize(computePodActions(tt.pod, v))
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", tt.want) {
				t.Errorf("actions:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestShouldRestart(t *testing.T) {
	pod := func(p corev1.RestartPolicy) *corev1.Pod { return testPod(p, nil, "a") }
	ex := func(code int32) *instance { i := inst("a", 0, exited, code); return &i }
	tests := []struct {
		name   string
		pod    *corev1.Pod
		t      containerType
		latest *instance
		want   bool
	}{
		{"never ran", pod(corev1.RestartPolicyNever), typeApp, nil, true},
		{"running", pod(corev1.RestartPolicyAlways), typeApp, &instance{state: running}, false},
		{"created", pod(corev1.RestartPolicyNever), typeApp, &instance{state: created}, true},
		{"always, success", pod(corev1.RestartPolicyAlways), typeApp, ex(0), true},
		{"on failure, success", pod(corev1.RestartPolicyOnFailure), typeApp, ex(0), false},
		{"on failure, failure", pod(corev1.RestartPolicyOnFailure), typeApp, ex(1), true},
		{"never, failure", pod(corev1.RestartPolicyNever), typeApp, ex(1), false},
		{"sidecar under never", pod(corev1.RestartPolicyNever), typeSidecar, ex(0), true},
	}
	for _, tt := range tests {
		if got := shouldRestart(tt.pod, tt.t, tt.latest); got != tt.want {
			t.Errorf("%s: shouldRestart = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestGCActions(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways, []string{"i1"}, "a", "b", "c")
	v := viewOf{pod: pod,
		sandboxes: []sandbox{{id: "sb2", attempt: 2, ready: true}, {id: "sb1", attempt: 1}, {id: "sb0", attempt: 0}},
		insts: []instance{
			// a runs; its previous run stays, older ones go.
			{name: "a", attempt: 0, state: exited, id: "a0", sandboxID: "sb0"},
			{name: "a", attempt: 1, state: exited, id: "a1", sandboxID: "sb2"},
			{name: "a", attempt: 2, state: exited, id: "a2", sandboxID: "sb2"},
			{name: "a", attempt: 3, state: running, id: "a3", sandboxID: "sb2"},
			// b crashed: only its newest run stays; a stale created instance goes.
			{name: "b", attempt: 0, state: exited, id: "b0", sandboxID: "sb2"},
			{name: "b", attempt: 1, state: created, id: "b1", sandboxID: "sb2"},
			{name: "b", attempt: 2, state: exited, id: "b2", sandboxID: "sb1"},
			// c: one instance.
			{name: "c", attempt: 0, state: running, id: "c0", sandboxID: "sb2"},
			{name: "i1", attempt: 0, state: exited, id: "i0", sandboxID: "sb2"},
		}}.build()
	cs, sbs := gcActions(v)
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.id)
	}
	slices.Sort(ids)
	if want := []string{"a0", "a1", "b0", "b1"}; !slices.Equal(ids, want) {
		t.Errorf("removed containers %v, want %v", ids, want)
	}
	// sb1 holds b's newest run; sb0 only a0, which goes.
	if want := []string{"sb0"}; !slices.Equal(sbs, want) {
		t.Errorf("removed sandboxes %v, want %v", sbs, want)
	}
}
