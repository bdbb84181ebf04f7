package kubelet

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// t0 is when the running containers of these tests started.
var t0 = time.Unix(1000, 0)

// gathered is what g gathers as "name{label="value",…}" → value (labels sorted; a
// histogram by its sample count, as name_count).
func gathered(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, fam := range fams {
		for _, m := range fam.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(labels)
			key := fam.GetName()
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[fam.GetName()+"_count"+strings.TrimPrefix(key, fam.GetName())] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// The runtime's instances of a running pod's containers: the current one once created,
// and the previous one while it is kept as the last termination.
func TestContainerInstances(t *testing.T) {
	exited := &ContainerState{Terminated: true, ExitCode: 1}
	for _, tc := range []struct {
		name  string
		state ContainerState
		want  map[string]int
	}{
		{"running", ContainerState{ContainerID: "c://1", StartedAt: t0}, map[string]int{"running": 1}},
		{"running after a restart", ContainerState{ContainerID: "c://2", StartedAt: t0, LastTerminated: exited}, map[string]int{"running": 1, "exited": 1}},
		{"crash loop: only the exited instance", ContainerState{Waiting: true, Reason: "CrashLoopBackOff", LastTerminated: exited}, map[string]int{"exited": 1}},
		{"not created yet", ContainerState{Waiting: true, Reason: "ContainerCreating"}, map[string]int{}},
		{"completed init container", ContainerState{ContainerID: "c://3", Terminated: true}, map[string]int{"exited": 1}},
	} {
		if got := containerInstances([]ContainerState{tc.state}); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A probe's runs count by result (an error is unknown), with durations of those that
// answered or errored; the pod's series go with its probes.
func TestProbeMetrics(t *testing.T) {
	h := newProbeHarness(t)
	h.m.metrics = newKubeletMetrics()
	pod := probedPod()
	pod.Spec.Containers[0].ReadinessProbe = execProbe("readiness", 100, 1)
	h.m.observe("default/web", pod, []ContainerState{runningState("app", "fake://a1", h.clock.Now())})
	w := h.worker(pod, "app", ProbeReadiness)
	w.probeOnce(context.Background()) // success
	h.prober.set(ProbeReadiness, ProbeFailure)
	w.probeOnce(context.Background())
	w.probeOnce(context.Background())
	h.m.prober = &erringProber{}
	w.probeOnce(context.Background())

	series := func(result string) string {
		return fmt.Sprintf(`prober_probe_total{container="app",namespace="default",pod="web",pod_uid="uid-1",probe_type="Readiness",result=%q}`, result)
	}
	got := gathered(t, h.m.metrics.probes)
	for k, v := range map[string]float64{series("successful"): 1, series("failed"): 2, series("unknown"): 1,
		`prober_probe_duration_seconds_count{container="app",namespace="default",pod="web",probe_type="Readiness"}`: 2} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	h.m.removePod(pod.UID)
	if got := gathered(t, h.m.metrics.probes); len(got) != 0 {
		t.Errorf("after the pod's probes stopped: %v", got)
	}
}

// /metrics counts the pods whose sandbox runs and their containers' instances, and
// names the node.
func TestPodCollector(t *testing.T) {
	k := &Kubelet{cfg: Config{NodeName: "node-a"}, pods: map[string]*podState{
		"default/web": {started: true, states: []ContainerState{
			{Name: "init", ContainerID: "c://i", Terminated: true},
			{Name: "app", ContainerID: "c://a2", StartedAt: t0, LastTerminated: &ContainerState{Terminated: true}},
		}},
		"default/done": {started: false, states: []ContainerState{{Name: "app", Terminated: true}}},
	}}
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, p := range []*corev1.Pod{testPod("web", "node-a"), testPod("done", "node-a")} {
		if err := pods.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	k.podLister = corelisters.NewPodLister(pods)
	reg := prometheus.NewRegistry()
	reg.MustRegister(podCollector{k})
	got := gathered(t, reg)
	for key, v := range map[string]float64{`kubelet_node_name{node="node-a"}`: 1, "kubelet_running_pods": 1,
		`kubelet_running_containers{container_state="running"}`: 1, `kubelet_running_containers{container_state="exited"}`: 2,
		`kubelet_desired_pods{static=""}`: 2} {
		if g, ok := got[key]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v; all: %v", key, g, ok, v, got)
		}
	}
}
