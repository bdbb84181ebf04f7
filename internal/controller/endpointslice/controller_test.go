package endpointslice

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// runningPod creates a pod bound to node with ip, Ready as ready says, as the
// scheduler and kubelet would leave it.
func runningPod(t *testing.T, c kubernetes.Interface, ns, name, node, ip string, port int32, ready bool) {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: port}}}}}}
	p, err := c.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setStatus(t, c, ns, name, ip, ready)
}

func setStatus(t *testing.T, c kubernetes.Interface, ns, name, ip string, ready bool) {
	t.Helper()
	ctx := context.Background()
	p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Phase, p.Status.PodIP, p.Status.PodIPs = corev1.PodRunning, ip, []corev1.PodIP{{IP: ip}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func slices(t *testing.T, c kubernetes.Interface, ns, svc string) []discoveryv1.EndpointSlice {
	t.Helper()
	list, err := c.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func view(list []discoveryv1.EndpointSlice) map[string]string {
	out := map[string]string{}
	for _, s := range list {
		port := int32(0)
		if len(s.Ports) > 0 {
			port = *s.Ports[0].Port
		}
		for _, ep := range s.Endpoints {
			out[ep.Addresses[0]] = fmt.Sprintf("%d %v/%v/%v zone=%s", port, *ep.Conditions.Ready, *ep.Conditions.Serving, *ep.Conditions.Terminating, deref(ep.Zone))
		}
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestServiceEndpointSlices(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	c := s.Client
	ns := "eps"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a",
		Labels: map[string]string{corev1.LabelTopologyZone: "us-east-1a"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(c, 0)
	ctrl, err := New(Config{}, c, factory)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	testutil.Start(t, "the endpointslice controller", 0, ctrl.Run, testutil.NoWait)

	svc, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"team": "x"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "an empty slice for a Service without pods", func() (bool, error) {
		l := slices(t, c, ns, "web")
		return len(l) == 1 && len(l[0].Endpoints) == 0, nil
	})
	runningPod(t, c, ns, "a", "node-a", "10.244.0.2", 8080, true)
	runningPod(t, c, ns, "b", "node-a", "10.244.0.3", 8080, false)
	runningPod(t, c, ns, "odd", "node-a", "10.244.0.4", 9090, true)
	want := map[string]string{
		"10.244.0.2": "8080 true/true/false zone=us-east-1a",
		"10.244.0.3": "8080 false/false/false zone=us-east-1a",
		"10.244.0.4": "9090 true/true/false zone=us-east-1a",
	}
	testutil.Eventually(t, "endpoints of the three pods", func() (bool, error) {
		got := view(slices(t, c, ns, "web"))
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Errorf("slices %v", got)
	})
	for _, sl := range slices(t, c, ns, "web") {
		ref := metav1.GetControllerOf(&sl)
		if sl.Labels[discoveryv1.LabelManagedBy] != ControllerName || sl.Labels["team"] != "x" || ref == nil || ref.UID != svc.UID ||
			sl.GenerateName != "web-" || sl.AddressType != discoveryv1.AddressTypeIPv4 {
			t.Errorf("slice %s: labels %v owner %v generateName %q", sl.Name, sl.Labels, sl.OwnerReferences, sl.GenerateName)
		}
	}
	// Nothing changes while nothing happens (no update loop against server defaults).
	before := map[string]string{}
	for _, sl := range slices(t, c, ns, "web") {
		before[sl.Name] = sl.ResourceVersion
	}
	testutil.Consistently(t, time.Second, "the slices as they are", func() error {
		for _, sl := range slices(t, c, ns, "web") {
			if before[sl.Name] != sl.ResourceVersion {
				return fmt.Errorf("slice %s rewritten with nothing changed", sl.Name)
			}
		}
		return nil
	})

	// b turns ready; a terminates (graceful deletion of a bound pod).
	setStatus(t, c, ns, "b", "10.244.0.3", true)
	if err := c.CoreV1().Pods(ns).Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want["10.244.0.3"] = "8080 true/true/false zone=us-east-1a"
	want["10.244.0.2"] = "8080 false/true/true zone=us-east-1a"
	testutil.Eventually(t, "b ready and a terminating", func() (bool, error) {
		got := view(slices(t, c, ns, "web"))
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Errorf("slices %v", got)
	})
}

// TestSyncWaitsForItsOwnWrites holds the controller's informer caches by hand (the
// factory is never started) so that a sync runs before the cache has seen the previous
// sync's writes, as happens when pods change back to back. Such a sync must neither
// create the slice a second time nor update a stale copy (a conflict, reported as a
// FailedToUpdateEndpointSlices warning on the Service); it waits for the cache.
func TestSyncWaitsForItsOwnWrites(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	c := s.Client
	ns := "stale"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(c, 0)
	ctrl, err := New(Config{}, c, factory)
	if err != nil {
		t.Fatal(err)
	}
	recorder := record.NewFakeRecorder(10)
	ctrl.recorder = recorder
	cached := func(inf cache.SharedIndexInformer, obj interface{}) {
		t.Helper()
		if err := inf.GetIndexer().Update(obj); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cached(factory.Core().V1().Services().Informer(), svc)
	pod := func(name, ip string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{NodeName: "node-a"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	}
	sliceCache := factory.Discovery().V1().EndpointSlices().Informer()
	sync := func() error { return ctrl.sync(ctx, ns+"/web") }
	stored := func() []discoveryv1.EndpointSlice { return slices(t, c, ns, "web") }

	// The first sync creates the slice; the cache has not seen it.
	cached(factory.Core().V1().Pods().Informer(), pod("a", "10.244.0.2"))
	if err := sync(); err != nil {
		t.Fatalf("first sync: %v", err)
	}
	if err := sync(); !errors.Is(err, errStaleCache) {
		t.Errorf("sync before the cache saw the created slice = %v, want %v", err, errStaleCache)
	}
	if l := stored(); len(l) != 1 {
		t.Fatalf("%d slices after two syncs, want 1", len(l))
	}

	// The cache catches up; a second pod: the slice is updated; the cache lags again.
	first := stored()[0]
	cached(sliceCache, &first)
	cached(factory.Core().V1().Pods().Informer(), pod("b", "10.244.0.3"))
	if err := sync(); err != nil {
		t.Fatalf("sync with the cache caught up: %v", err)
	}
	cached(factory.Core().V1().Pods().Informer(), pod("c", "10.244.0.4"))
	if err := sync(); !errors.Is(err, errStaleCache) {
		t.Errorf("sync from a slice older than the controller's update = %v, want %v", err, errStaleCache)
	}
	select {
	case ev := <-recorder.Events:
		t.Errorf("event while waiting for the cache: %s", ev)
	default:
	}

	// Caught up again: the third pod goes in.
	second := stored()[0]
	cached(sliceCache, &second)
	if err := sync(); err != nil {
		t.Fatalf("sync with the cache caught up: %v", err)
	}
	if l := stored(); len(l) != 1 || len(l[0].Endpoints) != 3 {
		t.Errorf("slices %v, want one with 3 endpoints", view(l))
	}
}
