package podautoscaler

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	scalefake "k8s.io/client-go/scale/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/testutil"
)

// fixture is a controller on fake clients: Deployments' scales, PodMetrics and pods the
// test sets, autoscalers in the fake API and the informer caches, a fake clock.
type fixture struct {
	t        *testing.T
	clock    *clocktesting.FakeClock
	kube     *kubefake.Clientset
	factory  informers.SharedInformerFactory
	c        *Controller
	recorder *record.FakeRecorder

	mu      sync.Mutex
	scales  map[string]*autoscalingv1.Scale // Deployments' scales by name
	updates []string                        // "<name>=<replicas>"
	metrics []metricsv1beta1.PodMetrics
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, clock: clocktesting.NewFakeClock(t0), kube: kubefake.NewClientset(), scales: map[string]*autoscalingv1.Scale{}}
	scales := &scalefake.FakeScaleClient{}
	scales.AddReactor("get", "deployments", func(a clienttesting.Action) (bool, runtime.Object, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		name := a.(clienttesting.GetAction).GetName()
		s, ok := f.scales[name]
		if !ok {
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, name)
		}
		return true, s.DeepCopy(), nil
	})
	scales.AddReactor("update", "deployments", func(a clienttesting.Action) (bool, runtime.Object, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		s := a.(clienttesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
		f.scales[s.Name].Spec.Replicas = s.Spec.Replicas
		f.updates = append(f.updates, fmt.Sprintf("%s=%d", s.Name, s.Spec.Replicas))
		return true, f.scales[s.Name].DeepCopy(), nil
	})
	metrics := metricsfake.NewSimpleClientset()
	metrics.PrependReactor("list", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		sel := a.(clienttesting.ListAction).GetListRestrictions().Labels
		list := &metricsv1beta1.PodMetricsList{}
		for _, m := range f.metrics {
			if m.Namespace == a.GetNamespace() && sel.Matches(labels.Set(m.Labels)) {
				list.Items = append(list.Items, m)
			}
		}
		return true, list, nil
	})
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{appsv1.SchemeGroupVersion})
	mapper.Add(appsv1.SchemeGroupVersion.WithKind("Deployment"), meta.RESTScopeNamespace)
	f.factory = informers.NewSharedInformerFactory(f.kube, 0)
	c, err := New(Config{Clock: f.clock, Logger: testLogger(t)}, Clients{Kube: f.kube, Metrics: metrics.MetricsV1beta1(), Scales: scales, Mapper: mapper}, f.factory)
	if err != nil {
		t.Fatal(err)
	}
	f.recorder = record.NewFakeRecorder(100)
	c.recorder = f.recorder
	f.c = c
	return f
}

// testLogger logs to t until the test ends.
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.done = true
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *testWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSuffix(string(b), "\n"))
	}
	return len(b), nil
}

// deployment makes the scale of Deployment name: replicas and the pod selector app=name.
func (f *fixture) deployment(name string, replicas int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scales[name] = &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: autoscalingv1.ScaleSpec{Replicas: replicas}, Status: autoscalingv1.ScaleStatus{Replicas: replicas, Selector: "app=" + name}}
}

func (f *fixture) replicas(name string) int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.scales[name].Spec.Replicas
}

func (f *fixture) scaleUpdates() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.updates...)
}

// pods adds n ready pods app=<app> (<app>-0…) requesting cpu and memory, each using
// cpuUsage and memUsage ("" for no sample).
func (f *fixture) pods(app string, n int, cpu, memory, cpuUsage, memUsage string) {
	f.t.Helper()
	for i := 0; i < n; i++ {
		p := testPod(fmt.Sprintf("%s-%d", app, i), cpu, memory)
		p.Labels = map[string]string{"app": app}
		if err := f.factory.Core().V1().Pods().Informer().GetIndexer().Add(p); err != nil {
			f.t.Fatal(err)
		}
		if _, err := f.kube.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			f.t.Fatal(err)
		}
		if cpuUsage == "" {
			continue
		}
		f.mu.Lock()
		f.metrics = append(f.metrics, metricsv1beta1.PodMetrics{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels},
			Timestamp:  metav1.NewTime(t0), Window: metav1.Duration{Duration: 15 * time.Second},
			Containers: []metricsv1beta1.ContainerMetrics{{Name: "app", Usage: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpuUsage), corev1.ResourceMemory: resource.MustParse(memUsage)}}},
		})
		f.mu.Unlock()
	}
}

// setUsage changes the CPU usage of every pod's sample.
func (f *fixture) setUsage(cpu string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.metrics {
		f.metrics[i].Containers[0].Usage[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
}

type hpaOpt func(*autoscalingv2.HorizontalPodAutoscaler)

func withBehavior(b *autoscalingv2.HorizontalPodAutoscalerBehavior) hpaOpt {
	return func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.Behavior = b }
}

func withMetric(m autoscalingv2.MetricSpec) hpaOpt {
	return func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.Metrics = []autoscalingv2.MetricSpec{m} }
}

func cpuUtilization(target int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(target)}}}
}

// hpa adds an autoscaler of Deployment target (CPU at 50% by default) to the API and the
// cache, and returns its key.
func (f *fixture) hpa(name, target string, minReplicas, maxReplicas int32, opts ...hpaOpt) string {
	f.t.Helper()
	h := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Generation: 3},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: target},
			MinReplicas:    ptr.To(minReplicas), MaxReplicas: maxReplicas,
			Metrics: []autoscalingv2.MetricSpec{cpuUtilization(50)},
		},
	}
	for _, o := range opts {
		o(h)
	}
	if _, err := f.kube.AutoscalingV2().HorizontalPodAutoscalers("default").Create(context.Background(), h, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	if err := f.factory.Autoscaling().V2().HorizontalPodAutoscalers().Informer().GetIndexer().Add(h); err != nil {
		f.t.Fatal(err)
	}
	return "default/" + name
}

// sync reconciles key once, its cache holding what the API has (as the informer would
// by the next sync period).
func (f *fixture) sync(key string) error {
	f.t.Helper()
	ns, name, _ := strings.Cut(key, "/")
	if h, err := f.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), name, metav1.GetOptions{}); err == nil {
		if err := f.factory.Autoscaling().V2().HorizontalPodAutoscalers().Informer().GetIndexer().Update(h); err != nil {
			f.t.Fatal(err)
		}
	}
	_, err := f.c.sync(context.Background(), key)
	return err
}

// status is the autoscaler's status as written to the API.
func (f *fixture) status(name string) autoscalingv2.HorizontalPodAutoscalerStatus {
	f.t.Helper()
	h, err := f.kube.AutoscalingV2().HorizontalPodAutoscalers("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return h.Status
}

// events are the events recorded since the last call.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func condition(st autoscalingv2.HorizontalPodAutoscalerStatus, typ autoscalingv2.HorizontalPodAutoscalerConditionType) string {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return fmt.Sprintf("%s %s %s", c.Status, c.Reason, c.Message)
		}
	}
	return ""
}

func wantCondition(t *testing.T, st autoscalingv2.HorizontalPodAutoscalerStatus, typ autoscalingv2.HorizontalPodAutoscalerConditionType, want string) {
	t.Helper()
	if got := condition(st, typ); got != want {
		t.Errorf("%s: %q, want %q", typ, got, want)
	}
}

func TestScaleUp(t *testing.T) {
	f := newFixture(t)
	f.deployment("web", 2)
	f.pods("web", 2, "100m", "64Mi", "200m", "32Mi")
	key := f.hpa("web", "web", 1, 10)

	if err := f.sync(key); err != nil {
		t.Fatal(err)
	}
	// 200% of the request against 50%: 8 pods, at most max(2×2, 4) at once.
	if got := f.replicas("web"); got != 4 {
		t.Errorf("replicas %d, want 4", got)
	}
	st := f.status("web")
	if st.CurrentReplicas != 2 || st.DesiredReplicas != 4 || st.LastScaleTime == nil || !st.LastScaleTime.Time.Equal(t0) ||
		st.ObservedGeneration == nil || *st.ObservedGeneration != 3 {
		t.Errorf("status: %+v", st)
	}
	if len(st.CurrentMetrics) != 1 || st.CurrentMetrics[0].Resource == nil || *st.CurrentMetrics[0].Resource.Current.AverageUtilization != 200 ||
		st.CurrentMetrics[0].Resource.Current.AverageValue.String() != "200m" {
		t.Errorf("current metrics: %+v", st.CurrentMetrics)
	}
	wantCondition(t, st, autoscalingv2.AbleToScale, "True SucceededRescale the HPA controller was able to update the target scale to 4")
	wantCondition(t, st, autoscalingv2.ScalingActive, "True ValidMetricFound the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)")
	wantCondition(t, st, autoscalingv2.ScalingLimited, "True ScaleUpLimit the desired replica count is increasing faster than the maximum scale rate")
	events := f.events()
	if len(events) != 1 || events[0] != "Normal SuccessfulRescale New size: 4; reason: cpu resource utilization (percentage of request) above target" {
		t.Errorf("events: %q", events)
	}

	// Once the recommendation of 8 has left the (legacy) stabilization window, a usage
	// within tolerance keeps the size.
	f.setUsage("52m")
	f.clock.Step(5*time.Minute + time.Second)
	if err := f.sync(key); err != nil {
		t.Fatal(err)
	}
	if got := f.scaleUpdates(); len(got) != 1 {
		t.Errorf("scale updates %v, want one", got)
	}
	st = f.status("web")
	if st.CurrentReplicas != 4 || st.DesiredReplicas != 4 || !st.LastScaleTime.Time.Equal(t0) {
		t.Errorf("status: %+v", st)
	}
	wantCondition(t, st, autoscalingv2.AbleToScale, "True ReadyForNewScale recommended size matches current size")
	wantCondition(t, st, autoscalingv2.ScalingLimited, "False DesiredWithinRange the desired count is within the acceptable range")
}

func TestScaleDownIsStabilized(t *testing.T) {
	f := newFixture(t)
	f.deployment("web", 4)
	f.pods("web", 4, "1", "64Mi", "100m", "32Mi")
	key := f.hpa("web", "web", 1, 10)

	// 10% against 50%: 1 pod, but the first recommendation is the current size.
	if err := f.sync(key); err != nil {
		t.Fatal(err)
	}
	st := f.status("web")
	if got := f.replicas("web"); got != 4 || st.DesiredReplicas != 4 || st.LastScaleTime != nil {
		t.Errorf("replicas %d, status %+v", got, st)
	}
	wantCondition(t, st, autoscalingv2.AbleToScale, "True ScaleDownStabilized recent recommendations were higher than current one, applying the highest recent recommendation")
	wantCondition(t, st, autoscalingv2.ScalingLimited, "False DesiredWithinRange the desired count is within the acceptable range")

	f.clock.Step(4 * time.Minute)
	if err := f.sync(key); err != nil {
		t.Fatal(err)
	}
	if got := f.replicas("web"); got != 4 {
		t.Errorf("scaled down within the stabilization window: %d", got)
	}
	f.clock.Step(61 * time.Second)
	if err := f.sync(key); err != nil {
		t.Fatal(err)
	}
	if got := f.replicas("web"); got != 1 {
		t.Errorf("replicas %d after the window, want 1", got)
	}
	if events := f.events(); len(events) != 1 || events[0] != "Normal SuccessfulRescale New size: 1; reason: All metrics below target" {
		t.Errorf("events: %q", events)
	}
	if st := f.status("web"); st.CurrentReplicas != 4 || st.DesiredReplicas != 1 || !st.LastScaleTime.Time.Equal(f.clock.Now()) {
		t.Errorf("status: %+v", st)
	}
}

func TestBehaviorPolicies(t *testing.T) {
	f := newFixture(t)
	f.deployment("web", 2)
	f.pods("web", 2, "100m", "64Mi", "200m", "32Mi")
	key := f.hpa("web", "web", 1, 10, withBehavior(&autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 60}}},
	}))
	step := func(d time.Duration, want int32) {
		t.Helper()
		f.clock.Step(d)
		if err := f.sync(key); err != nil {
			t.Fatal(err)
		}
		if got := f.replicas("web"); got != want {
			t.Errorf("at +%s: replicas %d, want %d", f.clock.Since(t0), got, want)
		}
	}
	step(0, 3)
	wantCondition(t, f.status("web"), autoscalingv2.ScalingLimited, "True ScaleUpLimit the desired replica count is increasing faster than the maximum scale rate")
	step(30*time.Second, 3)
	step(31*time.Second, 4)
	if got := f.scaleUpdates(); strings.Join(got, ",") != "web=3,web=4" {
		t.Errorf("scale updates %v", got)
	}
}

func TestAverageValueMemory(t *testing.T) {
	f := newFixture(t)
	f.deployment("cache", 2)
	f.pods("cache", 2, "100m", "64Mi", "10m", "128Mi")
	key := f.hpa("cache", "cache", 1, 10, withMetric(autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceMemory,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("64Mi"))}}}))
	if err := f.sync(key); err != nil {
		t.Fatal(err)
	}
	st := f.status("cache")
	if got := f.replicas("cache"); got != 4 || st.CurrentMetrics[0].Resource.Current.AverageValue.String() != "128Mi" ||
		st.CurrentMetrics[0].Resource.Current.AverageUtilization != nil {
		t.Errorf("replicas %d, metrics %+v", got, st.CurrentMetrics)
	}
	if events := f.events(); len(events) != 1 || events[0] != "Normal SuccessfulRescale New size: 4; reason: memory resource above target" {
		t.Errorf("events: %q", events)
	}
}

func TestMetricsUnavailable(t *testing.T) {
	f := newFixture(t)
	f.deployment("web", 2)
	f.pods("web", 2, "100m", "64Mi", "", "")
	key := f.hpa("web", "web", 1, 10)
	err := f.sync(key)
	const cause = "failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned from resource metrics API"
	if err == nil || !strings.Contains(err.Error(), cause) {
		t.Fatalf("sync: %v", err)
	}
	if got := f.scaleUpdates(); len(got) != 0 {
		t.Errorf("scaled without metrics: %v", got)
	}
	st := f.status("web")
	wantCondition(t, st, autoscalingv2.AbleToScale, "True SucceededGetScale the HPA controller was able to get the target's current scale")
	wantCondition(t, st, autoscalingv2.ScalingActive, "False FailedGetResourceMetric the HPA was unable to compute the replica count: "+cause)
	if st.CurrentReplicas != 2 {
		t.Errorf("status: %+v", st)
	}
	events := f.events()
	if len(events) != 2 || events[0] != "Warning FailedGetResourceMetric "+cause ||
		events[1] != "Warning FailedComputeMetricsReplicas invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: "+cause {
		t.Errorf("events: %q", events)
	}
}

func TestBoundsAndZero(t *testing.T) {
	f := newFixture(t)
	f.deployment("big", 12)
	f.deployment("small", 1)
	f.deployment("off", 0)
	for _, app := range []string{"big", "small", "off"} {
		f.pods(app, 1, "100m", "64Mi", "50m", "32Mi")
	}
	for _, tc := range []struct {
		key    string
		target string
		want   int32
		event  string
	}{
		{key: f.hpa("big", "big", 1, 10), target: "big", want: 10, event: "Normal SuccessfulRescale New size: 10; reason: Current number of replicas above Spec.MaxReplicas"},
		{key: f.hpa("small", "small", 3, 10), target: "small", want: 3, event: "Normal SuccessfulRescale New size: 3; reason: Current number of replicas below Spec.MinReplicas"},
		{key: f.hpa("off", "off", 1, 10), target: "off", want: 0},
	} {
		if err := f.sync(tc.key); err != nil {
			t.Fatal(err)
		}
		if got := f.replicas(tc.target); got != tc.want {
			t.Errorf("%s: replicas %d, want %d", tc.target, got, tc.want)
		}
		events := f.events()
		if (tc.event == "" && len(events) != 0) || (tc.event != "" && (len(events) != 1 || events[0] != tc.event)) {
			t.Errorf("%s: events %q", tc.target, events)
		}
	}
	wantCondition(t, f.status("off"), autoscalingv2.ScalingActive, "False ScalingDisabled scaling is disabled since the replica count of the target is zero")
	wantCondition(t, f.status("big"), autoscalingv2.ScaledToZero, "False NotScaledToZero the HPA controller did not scale the workload to zero")
}

func TestFailedGetScale(t *testing.T) {
	f := newFixture(t)
	key := f.hpa("web", "missing", 1, 10)
	if err := f.sync(key); err == nil || !strings.Contains(err.Error(), "failed to query scale subresource for Deployment/default/missing") {
		t.Fatalf("sync: %v", err)
	}
	wantCondition(t, f.status("web"), autoscalingv2.AbleToScale,
		`False FailedGetScale the HPA controller was unable to get the target's current scale: deployments.apps "missing" not found`)
	if events := f.events(); len(events) != 1 || events[0] != `Warning FailedGetScale deployments.apps "missing" not found` {
		t.Errorf("events: %q", events)
	}
	key = f.hpa("odd", "x", 1, 10, func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.ScaleTargetRef.Kind = "Widget" })
	if err := f.sync(key); err == nil || !strings.Contains(err.Error(), "unable to determine resource for scale target reference") {
		t.Fatalf("sync of an unknown kind: %v", err)
	}
}

func TestAmbiguousSelector(t *testing.T) {
	f := newFixture(t)
	f.deployment("web", 2)
	f.pods("web", 2, "100m", "64Mi", "50m", "32Mi")
	first, second := f.hpa("a", "web", 1, 10), f.hpa("b", "web", 1, 10)
	if err := f.sync(first); err != nil {
		t.Fatal(err)
	}
	if err := f.sync(second); err == nil {
		t.Fatal("two autoscalers of the same pods")
	}
	wantCondition(t, f.status("b"), autoscalingv2.ScalingActive,
		"False AmbiguousSelector pods by selector app=web are controlled by more than one HPA (e.g. [default/a default/b])")

	// Once the first is gone, the second works.
	if err := f.factory.Autoscaling().V2().HorizontalPodAutoscalers().Informer().GetIndexer().Delete(&autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default"}}); err != nil {
		t.Fatal(err)
	}
	if deleted, err := f.c.sync(context.Background(), first); !deleted || err != nil {
		t.Fatalf("sync of a deleted autoscaler: %v %v", deleted, err)
	}
	f.c.mu.Lock()
	_, remembered := f.c.recommendations[first]
	f.c.mu.Unlock()
	if remembered {
		t.Error("the deleted autoscaler's recommendations are kept")
	}
	if err := f.sync(second); err != nil {
		t.Fatal(err)
	}
}

func TestUnsupportedMetric(t *testing.T) {
	f := newFixture(t)
	f.deployment("web", 2)
	f.pods("web", 2, "100m", "64Mi", "200m", "32Mi")
	// A pods metric fails; the CPU metric still scales up.
	key := f.hpa("web", "web", 1, 10, func(h *autoscalingv2.HorizontalPodAutoscaler) {
		h.Spec.Metrics = append(h.Spec.Metrics, autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "requests_per_second"},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))}}})
	})
	err := f.sync(key)
	if err == nil || !strings.Contains(err.Error(), "no custom metrics API (custom.metrics.k8s.io) registered") {
		t.Fatalf("sync: %v", err)
	}
	if got := f.replicas("web"); got != 4 {
		t.Errorf("replicas %d, want 4", got)
	}
}

// Run reconciles an autoscaler as soon as it appears, through the informers.
func TestRun(t *testing.T) {
	f := newFixture(t)
	f.deployment("web", 2)
	f.pods("web", 2, "100m", "64Mi", "200m", "32Mi")
	ctx, cancel := context.WithCancel(context.Background())
	f.factory.Start(ctx.Done())
	t.Cleanup(func() { cancel(); f.factory.Shutdown() })
	testutil.Start(t, "the autoscaler controller", 0, f.c.Run, testutil.NoWait)
	h := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MaxReplicas: 10, Metrics: []autoscalingv2.MetricSpec{cpuUtilization(50)}}}
	if _, err := f.kube.AutoscalingV2().HorizontalPodAutoscalers("default").Create(ctx, h, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "web rescaled to 4", func() error {
		if n := f.replicas("web"); n != 4 {
			return fmt.Errorf("%d replicas", n)
		}
		return nil
	})
}
