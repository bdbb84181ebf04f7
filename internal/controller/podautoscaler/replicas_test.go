package podautoscaler

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// podOpt changes a test pod.
type podOpt func(*corev1.Pod)

// testPod is a running pod, ready since long ago, with one container requesting the
// given CPU and memory.
func testPod(name, cpu, memory string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: t0.Add(-time.Hour)},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }

func deleted(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: t0} }

// startedUnready started a minute ago and is not ready yet.
func startedUnready(p *corev1.Pod) {
	p.Status.StartTime = &metav1.Time{Time: t0.Add(-time.Minute)}
	p.Status.Conditions[0].Status, p.Status.Conditions[0].LastTransitionTime = corev1.ConditionFalse, metav1.NewTime(t0.Add(-time.Minute))
}

// justReady started a minute ago and became ready 5s ago: its sample (window 15s) may be
// from before.
func justReady(p *corev1.Pod) {
	p.Status.StartTime = &metav1.Time{Time: t0.Add(-time.Minute)}
	p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(-5 * time.Second))
}

// neverReady started 10 minutes ago and has never been ready.
func neverReady(p *corev1.Pod) {
	p.Status.StartTime = &metav1.Time{Time: t0.Add(-10 * time.Minute)}
	p.Status.Conditions[0].Status, p.Status.Conditions[0].LastTransitionTime = corev1.ConditionFalse, metav1.NewTime(t0.Add(-10*time.Minute))
}

// lostReadiness was ready and became unready after its start.
func lostReadiness(p *corev1.Pod) {
	p.Status.Conditions[0].Status, p.Status.Conditions[0].LastTransitionTime = corev1.ConditionFalse, metav1.NewTime(t0.Add(-time.Minute))
}

func withSidecar(cpu string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}},
			corev1.Container{Name: "setup", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5")}}})
	}
}

func podLevel(cpu string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}
	}
}

func noCPURequest(p *corev1.Pod) { delete(p.Spec.Containers[0].Resources.Requests, corev1.ResourceCPU) }

// usage is a sample per pod, in milli-units, taken at t0 over 15s.
func usage(values map[string]int64) podMetrics {
	out := podMetrics{}
	for name, v := range values {
		out[name] = podMetric{timestamp: t0, window: 15 * time.Second, value: v}
	}
	return out
}

func defaultReadiness() readiness {
	return readiness{cpuInitializationPeriod: 5 * time.Minute, initialReadinessDelay: 30 * time.Second, now: t0}
}

func TestUtilizationReplicas(t *testing.T) {
	tol := tolerances{scaleDown: 0.1, scaleUp: 0.1}
	for _, tc := range []struct {
		name      string
		current   int32
		pods      []*corev1.Pod
		metrics   podMetrics
		resource  corev1.ResourceName
		container string
		target    int32
		tol       *tolerances

		want            int32
		wantUtilization int32
		wantAverage     int64
		err             string
	}{
		{name: "scale up", current: 3, target: 50,
			pods:    []*corev1.Pod{testPod("a", "1", "1Gi"), testPod("b", "1", "1Gi"), testPod("c", "1", "1Gi")},
			metrics: usage(map[string]int64{"a": 900, "b": 1000, "c": 1100}),
			want:    6, wantUtilization: 100, wantAverage: 1000},
		{name: "scale down", current: 4, target: 50,
			pods:    []*corev1.Pod{testPod("a", "1", "1Gi"), testPod("b", "1", "1Gi"), testPod("c", "1", "1Gi"), testPod("d", "1", "1Gi")},
			metrics: usage(map[string]int64{"a": 100, "b": 100, "c": 100, "d": 100}),
			want:    1, wantUtilization: 10, wantAverage: 100},
		{name: "within tolerance", current: 2, target: 50,
			pods:    []*corev1.Pod{testPod("a", "1", "1Gi"), testPod("b", "1", "1Gi")},
			metrics: usage(map[string]int64{"a": 520, "b": 530}),
			want:    2, wantUtilization: 52, wantAverage: 525},
		{name: "tolerance of the autoscaler", current: 2, target: 50, tol: &tolerances{scaleDown: 0.1, scaleUp: 0.01},
			pods:    []*corev1.Pod{testPod("a", "1", "1Gi"), testPod("b", "1", "1Gi")},
			metrics: usage(map[string]int64{"a": 520, "b": 530}),
			want:    3, wantUtilization: 52, wantAverage: 525},
		{name: "missing pods count as using nothing on a scale up", current: 3, target: 50,
			pods:    []*corev1.Pod{testPod("a", "1", "1Gi"), testPod("b", "1", "1Gi"), testPod("c", "1", "1Gi")},
			metrics: usage(map[string]int64{"a": 1000, "b": 1000}),
			// (1000+1000+0)/3000 = 66% → ratio 1.33 over 3 pods.
			want: 4, wantUtilization: 100, wantAverage: 1000},
		{name: "missing pods count as using their request on a scale down", current: 3, target: 50,
			pods:    []*corev1.Pod{testPod("a", "1", "1Gi"), testPod("b", "1", "1Gi"), testPod("c", "1", "1Gi")},
			metrics: usage(map[string]int64{"a": 100, "b": 100}),
			// (100+100+1000)/3000 = 40% → ratio 0.8 over 3 pods.
			want: 3, wantUtilization: 10, wantAverage: 100},
		{name: "missing pods count as using the target when above 100%", current: 4, target: 200,
			pods:    []*corev1.Pod{testPod("a", "1", "1Gi"), testPod("b", "1", "1Gi"), testPod("c", "1", "1Gi"), testPod("d", "1", "1Gi")},
			metrics: usage(map[string]int64{"a": 100, "b": 100}),
			// (100+100+2000+2000)/4000 = 105% → ratio 0.525 over 4 pods.
			want: 3, wantUtilization: 10, wantAverage: 100},
		{name: "a missing pod that flips the direction keeps the count", current: 2, target: 50,
			pods:    []*corev1.Pod{testPod("a", "1", "1Gi"), testPod("b", "1", "1Gi")},
			metrics: usage(map[string]int64{"a": 400}),
			// 40% → ratio 0.8, but with b at 100%: 70% → ratio 1.4.
			want: 2, wantUtilization: 40, wantAverage: 400},
		{name: "unready pods count as using nothing on a scale up", current: 3, target: 50,
			pods:    []*corev1.Pod{testPod("a", "1", "1Gi"), testPod("b", "1", "1Gi"), testPod("c", "1", "1Gi", startedUnready)},
			metrics: usage(map[string]int64{"a": 1000, "b": 1000, "c": 3000}),
			// a, b at 100% → ratio 2; with c at 0: 66% → ratio 1.33 over 3 pods.
			want: 4, wantUtilization: 100, wantAverage: 1000},
		{name: "unready pods are left out of a scale down", current: 3, target: 50,
			pods:    []*corev1.Pod{testPod("a", "1", "1Gi"), testPod("b", "1", "1Gi"), testPod("c", "1", "1Gi", startedUnready)},
			metrics: usage(map[string]int64{"a": 100, "b": 100, "c": 3000}),
			want:    1, wantUtilization: 10, wantAverage: 100},
		{name: "a sample from before the pod became ready does not count", current: 2, target: 50,
			pods:    []*corev1.Pod{testPod("a", "1", "1Gi"), testPod("b", "1", "1Gi", justReady)},
			metrics: usage(map[string]int64{"a": 1000, "b": 5000}),
			// a at 100% → ratio 2; with b at 0: 50% → ratio 1.0, within tolerance.
			want: 2, wantUtilization: 100, wantAverage: 1000},
		{name: "a pod never ready after the readiness delay is unready", current: 2, target: 50,
			pods:    []*corev1.Pod{testPod("a", "1", "1Gi"), testPod("b", "1", "1Gi", neverReady)},
			metrics: usage(map[string]int64{"a": 2000, "b": 5000}),
			// a at 200% → ratio 4; with b at 0: 100% → ratio 2 over 2 pods.
			want: 4, wantUtilization: 200, wantAverage: 2000},
		{name: "a pod that lost readiness after its start counts", current: 2, target: 50,
			pods:    []*corev1.Pod{testPod("a", "1", "1Gi"), testPod("b", "1", "1Gi", lostReadiness)},
			metrics: usage(map[string]int64{"a": 1000, "b": 1000}),
			want:    4, wantUtilization: 100, wantAverage: 1000},
		{name: "readiness does not matter for memory", resource: corev1.ResourceMemory, current: 2, target: 50,
			pods:    []*corev1.Pod{testPod("a", "1", "1000", startedUnready), testPod("b", "1", "1000")},
			metrics: usage(map[string]int64{"a": 1_000_000, "b": 1_000_000}),
			want:    4, wantUtilization: 100, wantAverage: 1_000_000},
		{name: "pending pods count as unready, deleted and failed pods are ignored", current: 4, target: 50,
			pods: []*corev1.Pod{testPod("a", "1", "1Gi"), testPod("b", "1", "1Gi"), testPod("p", "1", "1Gi", phase(corev1.PodPending)),
				testPod("d", "1", "1Gi", deleted), testPod("f", "1", "1Gi", phase(corev1.PodFailed))},
			metrics: usage(map[string]int64{"a": 1000, "b": 1000, "d": 9000, "f": 9000}),
			// a, b at 100% → ratio 2; with p at 0: 66% → ratio 1.33 over 3 pods.
			want: 4, wantUtilization: 100, wantAverage: 1000},
		{name: "requests of sidecars add up, other init containers do not", current: 1, target: 50,
			pods:    []*corev1.Pod{testPod("a", "500m", "1Gi", withSidecar("500m"))},
			metrics: usage(map[string]int64{"a": 2000}),
			want:    4, wantUtilization: 200, wantAverage: 2000},
		{name: "pod-level requests", current: 1, target: 50,
			pods:    []*corev1.Pod{testPod("a", "100m", "1Gi", podLevel("4"))},
			metrics: usage(map[string]int64{"a": 4000}),
			want:    2, wantUtilization: 100, wantAverage: 4000},
		{name: "one container", container: "proxy", current: 1, target: 50,
			pods:    []*corev1.Pod{testPod("a", "4", "1Gi", withSidecar("1"), podLevel("8"))},
			metrics: usage(map[string]int64{"a": 1500}),
			want:    3, wantUtilization: 150, wantAverage: 1500},
		{name: "no samples of ready pods", current: 2, target: 50,
			pods:    []*corev1.Pod{testPod("a", "1", "1Gi", startedUnready), testPod("b", "1", "1Gi")},
			metrics: usage(map[string]int64{"a": 1000}),
			err:     "did not receive metrics for targeted pods (pods might be unready)"},
		{name: "no pods", current: 2, target: 50, metrics: usage(map[string]int64{"a": 1000}),
			err: "no pods returned by selector while calculating replica count"},
		{name: "a container without a request", current: 2, target: 50,
			pods:    []*corev1.Pod{testPod("a", "1", "1Gi", noCPURequest)},
			metrics: usage(map[string]int64{"a": 1000}),
			err:     "missing request for cpu in container app of Pod a"},
		{name: "an unknown container", container: "nope", current: 1, target: 50,
			pods:    []*corev1.Pod{testPod("a", "1", "1Gi")},
			metrics: usage(map[string]int64{"a": 1000}),
			err:     "container nope not found in Pod a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := replicaInput{current: tc.current, pods: tc.pods, metrics: tc.metrics, resource: tc.resource, container: tc.container,
				tolerances: tol, readiness: defaultReadiness()}
			if in.resource == "" {
				in.resource = corev1.ResourceCPU
			}
			if tc.tol != nil {
				in.tolerances = *tc.tol
			}
			before := len(tc.metrics)
			got, utilization, average, err := utilizationReplicas(in, tc.target)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || utilization != tc.wantUtilization || average != tc.wantAverage {
				t.Errorf("replicas %d utilization %d average %d, want %d %d %d", got, utilization, average, tc.want, tc.wantUtilization, tc.wantAverage)
			}
			if len(tc.metrics) != before {
				t.Error("the input samples were changed")
			}
		})
	}
}

func TestAverageValueReplicas(t *testing.T) {
	tol := tolerances{scaleDown: 0.1, scaleUp: 0.1}
	three := func(opts ...podOpt) []*corev1.Pod {
		return []*corev1.Pod{testPod("a", "1", "1Gi"), testPod("b", "1", "1Gi"), testPod("c", "1", "1Gi", opts...)}
	}
	for _, tc := range []struct {
		name    string
		current int32
		pods    []*corev1.Pod
		metrics podMetrics
		target  int64

		want        int32
		wantAverage int64
		err         string
	}{
		{name: "scale up", current: 3, pods: three(), target: 500, metrics: usage(map[string]int64{"a": 1000, "b": 1000, "c": 1000}),
			want: 6, wantAverage: 1000},
		{name: "scale down", current: 3, pods: three(), target: 500, metrics: usage(map[string]int64{"a": 100, "b": 100, "c": 100}),
			want: 1, wantAverage: 100},
		{name: "within tolerance", current: 3, pods: three(), target: 500, metrics: usage(map[string]int64{"a": 520, "b": 480, "c": 530}),
			want: 3, wantAverage: 510},
		{name: "a missing pod uses nothing on a scale up", current: 3, pods: three(), target: 500, metrics: usage(map[string]int64{"a": 1500, "b": 1500}),
			// (1500+1500+0)/3 = 1000 → ratio 2 over 3 pods.
			want: 6, wantAverage: 1500},
		{name: "a missing pod uses the target on a scale down", current: 3, pods: three(), target: 500, metrics: usage(map[string]int64{"a": 50, "b": 100}),
			// (50+100+500)/3 = 216 → ratio 0.43 over 3 pods.
			want: 2, wantAverage: 75},
		{name: "an unready pod uses nothing on a scale up", current: 3, pods: three(startedUnready), target: 500,
			metrics: usage(map[string]int64{"a": 1500, "b": 1500, "c": 9000}),
			want:    6, wantAverage: 1500},
		{name: "nothing counted", current: 3, pods: three(), target: 500, metrics: podMetrics{},
			err: "did not receive metrics for targeted pods (pods might be unready)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := replicaInput{current: tc.current, pods: tc.pods, metrics: tc.metrics, resource: corev1.ResourceCPU, tolerances: tol, readiness: defaultReadiness()}
			got, average, err := averageValueReplicas(in, tc.target)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || average != tc.wantAverage {
				t.Errorf("replicas %d average %d, want %d %d", got, average, tc.want, tc.wantAverage)
			}
		})
	}
}
