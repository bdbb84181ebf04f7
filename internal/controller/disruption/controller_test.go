package disruption

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// clock is a settable Config.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }

// newClient is a fake clientset holding objs that moves resourceVersion on every create
// and update, as the API server does (the informers' handlers compare them).
func newClient(objs ...runtime.Object) *fake.Clientset {
	client := fake.NewClientset(objs...)
	var rv atomic.Int64
	rv.Store(1000)
	bump := func(a k8stesting.Action) (bool, runtime.Object, error) {
		var obj runtime.Object
		switch a := a.(type) {
		case k8stesting.CreateAction:
			obj = a.GetObject()
		case k8stesting.UpdateAction:
			obj = a.GetObject()
		}
		if m, err := meta.Accessor(obj); err == nil {
			m.SetResourceVersion(strconv.FormatInt(rv.Add(1), 10))
		}
		return false, nil, nil
	}
	client.PrependReactor("create", "*", bump)
	client.PrependReactor("update", "*", bump)
	return client
}

func start(t *testing.T, client *fake.Clientset, now func() time.Time) {
	t.Helper()
	controllertest.RunController(t, client, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return New(Config{Now: now}, client, f)
	})
}

func budget(name string, spec policyv1.PodDisruptionBudgetSpec) *policyv1.PodDisruptionBudget {
	spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Generation: 1}, Spec: spec}
}

func getPDB(t *testing.T, client *fake.Clientset, name string) *policyv1.PodDisruptionBudget {
	t.Helper()
	pdb, err := client.PolicyV1().PodDisruptionBudgets("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pdb
}

// waitStatus waits until the budget's status has the counts and the condition reason.
func waitStatus(t *testing.T, client *fake.Clientset, name string, current, desired, expected, allowed int32, reason string) *policyv1.PodDisruptionBudget {
	t.Helper()
	var pdb *policyv1.PodDisruptionBudget
	testutil.EventuallyWithin(t, 10*time.Second, fmt.Sprintf("status %d/%d/%d/%d %s", current, desired, expected, allowed, reason), func() (bool, error) {
		pdb = getPDB(t, client, name)
		st := pdb.Status
		c := meta.FindStatusCondition(st.Conditions, policyv1.DisruptionAllowedCondition)
		if c == nil || c.Reason != reason || st.CurrentHealthy != current || st.DesiredHealthy != desired ||
			st.ExpectedPods != expected || st.DisruptionsAllowed != allowed || st.ObservedGeneration != pdb.Generation {
			return false, fmt.Errorf("status %+v", st)
		}
		return true, nil
	})
	return pdb
}

func TestDisruptionControllerKeepsStatus(t *testing.T) {
	ctx := context.Background()
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "rs-uid"},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](4)}}
	ofRS := ownedBy("apps/v1", "ReplicaSet", "web", "rs-uid")
	objs := []runtime.Object{rs, budget("web", policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))})}
	for _, name := range []string{"a", "b", "c"} {
		objs = append(objs, mkPod(name, ready, ofRS))
	}
	client := newClient(objs...)
	start(t, client, time.Now)

	// 4 replicas expected, at most 1 unavailable: 3 desired, 3 ready, none to spare.
	waitStatus(t, client, "web", 3, 3, 4, 0, policyv1.InsufficientPodsReason)

	// The fourth pod comes up.
	if _, err := client.CoreV1().Pods("ns").Create(ctx, mkPod("d", ready, ofRS), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pdb := waitStatus(t, client, "web", 4, 3, 4, 1, policyv1.SufficientPodsReason)
	if c := meta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition); c.Status != metav1.ConditionTrue {
		t.Errorf("DisruptionAllowed = %+v, want True", c)
	}

	// One goes unready.
	p, err := client.CoreV1().Pods("ns").Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	if _, err := client.CoreV1().Pods("ns").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, client, "web", 3, 3, 4, 0, policyv1.InsufficientPodsReason)

	for _, a := range client.Actions() {
		if a.GetResource().Resource == "poddisruptionbudgets" && (a.GetVerb() == "update" || a.GetVerb() == "patch") && a.GetSubresource() != "status" {
			t.Errorf("%s of poddisruptionbudgets/%s, want only the status", a.GetVerb(), a.GetSubresource())
		}
	}
}

func TestDisruptionControllerExpiresDisruptedPods(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now().Truncate(time.Second)
	clk := &clock{now: t0}
	pdb := budget("web", policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2))})
	// The eviction subresource let pod a go a minute ago.
	pdb.Status.DisruptedPods = map[string]metav1.Time{"a": metav1.NewTime(t0.Add(-time.Minute))}
	client := newClient(pdb, mkPod("a", ready), mkPod("b", ready), mkPod("c", ready))
	start(t, client, clk.Now)

	got := waitStatus(t, client, "web", 2, 2, 3, 0, policyv1.InsufficientPodsReason)
	if _, ok := got.Status.DisruptedPods["a"]; !ok || len(got.Status.DisruptedPods) != 1 {
		t.Errorf("disruptedPods = %v, want a kept", got.Status.DisruptedPods)
	}

	// Two minutes after the eviction pod a is still not being deleted: the entry goes
	// and the pod counts again.
	clk.Set(t0.Add(90 * time.Second))
	got.Labels = map[string]string{"touched": "yes"} // any change makes the controller look again
	if _, err := client.PolicyV1().PodDisruptionBudgets("ns").Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got = waitStatus(t, client, "web", 3, 2, 3, 1, policyv1.SufficientPodsReason)
	if len(got.Status.DisruptedPods) != 0 {
		t.Errorf("disruptedPods = %v, want none", got.Status.DisruptedPods)
	}
	testutil.EventuallyWithin(t, 10*time.Second, "NotDeleted event on pod a", func() (bool, error) {
		for _, e := range controllertest.EventsAbout(t, client, "ns", "a") {
			if e.Reason == "NotDeleted" && e.Type == corev1.EventTypeWarning && e.Source.Component == ComponentName &&
				e.Message == "Pod was expected by PDB ns/web to be deleted but it wasn't" {
				return true, nil
			}
		}
		return false, nil
	})
}

func TestDisruptionControllerFailSafe(t *testing.T) {
	pdb := budget("web", policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromString("50%"))})
	pdb.Status = policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 3, ObservedGeneration: 1}
	// A controller whose scale is not read from a cache.
	client := newClient(pdb, mkPod("p", ready, ownedBy("apps/v1", "DaemonSet", "ds", "ds-uid")))
	start(t, client, time.Now)

	testutil.EventuallyWithin(t, 10*time.Second, "SyncFailed", func() (bool, error) {
		st := getPDB(t, client, "web").Status
		c := meta.FindStatusCondition(st.Conditions, policyv1.DisruptionAllowedCondition)
		if st.DisruptionsAllowed != 0 || c == nil || c.Status != metav1.ConditionFalse || c.Reason != policyv1.SyncFailedReason ||
			c.Message != `found no controllers for pod "p"` {
			return false, fmt.Errorf("status %+v", st)
		}
		return true, nil
	})
	testutil.EventuallyWithin(t, 10*time.Second, "CalculateExpectedPodCountFailed event", func() (bool, error) {
		return controllertest.HasEvent(t, client, "ns", "web", "CalculateExpectedPodCountFailed"), nil
	})
}

func TestDisruptionControllerResetsStaleDisruptionTarget(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	pod := mkPod("p", ready, func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting", LastTransitionTime: metav1.NewTime(now.Add(-3 * time.Minute))})
	})
	client := newClient(pod)
	start(t, client, func() time.Time { return now })

	testutil.EventuallyWithin(t, 10*time.Second, "DisruptionTarget False", func() (bool, error) {
		p, err := client.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.DisruptionTarget {
				return c.Status == corev1.ConditionFalse && c.Reason == "" && c.LastTransitionTime.Time.Equal(now), fmt.Errorf("condition %+v", c)
			}
		}
		return false, fmt.Errorf("no DisruptionTarget condition")
	})
}

func TestDisruptionControllerNoPodsAndMultipleBudgets(t *testing.T) {
	ctx := context.Background()
	client := newClient(budget("one", policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1))}),
		budget("two", policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1))}))
	start(t, client, time.Now)
	waitStatus(t, client, "one", 0, 1, 0, 0, policyv1.InsufficientPodsReason)
	testutil.EventuallyWithin(t, 10*time.Second, "NoPods event", func() (bool, error) {
		return controllertest.HasEvent(t, client, "ns", "one", "NoPods"), nil
	})
	if _, err := client.CoreV1().Pods("ns").Create(ctx, mkPod("p", ready), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 10*time.Second, "MultiplePodDisruptionBudgets event on the pod", func() (bool, error) {
		return controllertest.HasEvent(t, client, "ns", "p", "MultiplePodDisruptionBudgets"), nil
	})
}
