package apiserver

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

var evictNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func evictPod(name string, phase corev1.PodPhase, ready bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid"), ResourceVersion: "10",
		Labels: map[string]string{"app": "web"}}, Status: corev1.PodStatus{Phase: phase}}
	if ready {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	return p
}

func evictBudget(name string, st policyv1.PodDisruptionBudgetStatus) policyv1.PodDisruptionBudget {
	if st.ObservedGeneration == 0 {
		st.ObservedGeneration = 1
	}
	return policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Generation: 1},
		Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status: st}
}

func TestEvictionCanIgnoreBudget(t *testing.T) {
	deleting := evictPod("p", corev1.PodRunning, true)
	deleting.DeletionTimestamp = ptr.To(metav1.NewTime(evictNow))
	for _, tc := range []struct {
		name            string
		pod             *corev1.Pod
		ignore, enforce bool
	}{
		{"running", evictPod("p", corev1.PodRunning, true), false, true},
		{"unknown phase", evictPod("p", corev1.PodUnknown, false), false, true},
		{"pending", evictPod("p", corev1.PodPending, false), true, true},
		{"succeeded", evictPod("p", corev1.PodSucceeded, false), true, false},
		{"failed", evictPod("p", corev1.PodFailed, false), true, false},
		{"being deleted", deleting, true, false},
	} {
		if got := canIgnoreBudget(tc.pod); got != tc.ignore {
			t.Errorf("%s: canIgnoreBudget = %t, want %t", tc.name, got, tc.ignore)
		}
		if got := enforceResourceVersion(tc.pod); got != tc.enforce {
			t.Errorf("%s: enforceResourceVersion = %t, want %t", tc.name, got, tc.enforce)
		}
	}
}

func TestEvictionBudgetsFor(t *testing.T) {
	pod := evictPod("p", corev1.PodRunning, true)
	match := evictBudget("match", policyv1.PodDisruptionBudgetStatus{})
	other := evictBudget("other-namespace", policyv1.PodDisruptionBudgetStatus{})
	other.Namespace = "elsewhere"
	everything := evictBudget("everything", policyv1.PodDisruptionBudgetStatus{})
	everything.Spec.Selector = &metav1.LabelSelector{}
	nothing := evictBudget("nothing", policyv1.PodDisruptionBudgetStatus{})
	nothing.Spec.Selector = nil
	invalid := evictBudget("invalid", policyv1.PodDisruptionBudgetStatus{})
	invalid.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}
	miss := evictBudget("miss", policyv1.PodDisruptionBudgetStatus{})
	miss.Spec.Selector.MatchLabels = map[string]string{"app": "db"}
	var names []string
	for _, b := range budgetsFor(pod, []policyv1.PodDisruptionBudget{match, other, everything, nothing, invalid, miss}) {
		names = append(names, b.Name)
	}
	if want := []string{"match", "everything"}; !reflect.DeepEqual(names, want) {
		t.Errorf("budgetsFor = %v, want %v", names, want)
	}
}

func TestEvictionPlan(t *testing.T) {
	healthy := policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 3, DesiredHealthy: 2, DisruptionsAllowed: 1}
	short := policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 1, DesiredHealthy: 2}
	withPolicy := func(b policyv1.PodDisruptionBudget, p policyv1.UnhealthyPodEvictionPolicyType) policyv1.PodDisruptionBudget {
		b.Spec.UnhealthyPodEvictionPolicy = &p
		return b
	}
	ready, unready := evictPod("p", corev1.PodRunning, true), evictPod("p", corev1.PodRunning, false)
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		pdbs []policyv1.PodDisruptionBudget
		want evictionPlan
	}{
		{"no budget", ready, nil, deleteFreely},
		{"ready pod spends a disruption", ready, []policyv1.PodDisruptionBudget{evictBudget("b", healthy)}, takeFromBudget},
		{"ready pod, AlwaysAllow", ready, []policyv1.PodDisruptionBudget{withPolicy(evictBudget("b", short), policyv1.AlwaysAllow)}, takeFromBudget},
		{"unready pod, AlwaysAllow", unready, []policyv1.PodDisruptionBudget{withPolicy(evictBudget("b", short), policyv1.AlwaysAllow)}, deleteUnhealthy},
		{"unready pod, healthy budget", unready, []policyv1.PodDisruptionBudget{evictBudget("b", healthy)}, deleteUnhealthy},
		{"unready pod, healthy budget, IfHealthyBudget", unready, []policyv1.PodDisruptionBudget{withPolicy(evictBudget("b", healthy), policyv1.IfHealthyBudget)}, deleteUnhealthy},
		{"unready pod, budget short", unready, []policyv1.PodDisruptionBudget{evictBudget("b", short)}, takeFromBudget},
		{"unready pod, nothing desired", unready, []policyv1.PodDisruptionBudget{evictBudget("b", policyv1.PodDisruptionBudgetStatus{})}, takeFromBudget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, status := planEviction(tc.pod, tc.pdbs)
			if status != nil || got != tc.want {
				t.Errorf("planEviction = %v, %+v; want %v", got, status, tc.want)
			}
		})
	}
	_, status := planEviction(ready, []policyv1.PodDisruptionBudget{evictBudget("a", healthy), evictBudget("b", healthy)})
	want := &metav1.Status{Status: metav1.StatusFailure, Code: 500,
		Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."}
	if !reflect.DeepEqual(status, want) {
		t.Errorf("two budgets: %+v, want %+v", status, want)
	}
}

// budgetCause is the DisruptionBudget cause of a refusal.
func budgetCause(t *testing.T, err error) string {
	t.Helper()
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Details == nil {
		t.Fatalf("not a status error with details: %v", err)
	}
	for _, c := range se.ErrStatus.Details.Causes {
		if c.Type == policyv1.DisruptionBudgetCause {
			return c.Message
		}
	}
	t.Fatalf("no DisruptionBudget cause in %+v", se.ErrStatus)
	return ""
}

func TestEvictionTakeDisruption(t *testing.T) {
	falseCond := func(reason, msg string) []metav1.Condition {
		return []metav1.Condition{{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse, Reason: reason, Message: msg}}
	}
	const tooMany = "Cannot evict pod as it would violate the pod's disruption budget."
	for _, tc := range []struct {
		name       string
		pdb        policyv1.PodDisruptionBudget
		code       int32
		message    string
		cause      string
		retryAfter int32
	}{
		{name: "not observed yet", pdb: func() policyv1.PodDisruptionBudget {
			b := evictBudget("web", policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 3})
			b.Generation = 2
			return b
		}(), code: http.StatusTooManyRequests, message: tooMany, retryAfter: 10,
			cause: "The disruption budget web is still being processed by the server."},
		{name: "negative", pdb: evictBudget("web", policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: -1}), code: http.StatusForbidden,
			message: `poddisruptionbudget.policy "web" is forbidden: pdb disruptions allowed is negative`,
			cause:   "The disruption budget web does not allow evicting pods currently: pdb disruptions allowed is negative"},
		{name: "too many unconfirmed", pdb: func() policyv1.PodDisruptionBudget {
			b := evictBudget("web", policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 5, DisruptedPods: map[string]metav1.Time{}})
			for i := 0; i <= maxDisruptedPods; i++ {
				b.Status.DisruptedPods["p"+strconv.Itoa(i)] = metav1.NewTime(evictNow)
			}
			return b
		}(), code: http.StatusForbidden,
			message: `poddisruptionbudget.policy "web" is forbidden: DisruptedPods map too big - too many evictions not confirmed by PDB controller`,
			cause:   "The disruption budget web does not allow evicting pods currently: too many pending evictions not confirmed by PDB controller"},
		{name: "sync failed", pdb: evictBudget("web", policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 5, DesiredHealthy: 1,
			Conditions: falseCond(policyv1.SyncFailedReason, `found no controllers for pod "p"`)}),
			code: http.StatusTooManyRequests, message: tooMany,
			cause: `The disruption budget web does not allow evicting pods currently because it failed sync: found no controllers for pod "p"`},
		{name: "needs healthy pods", pdb: evictBudget("web", policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 2, DesiredHealthy: 3,
			Conditions: falseCond(policyv1.InsufficientPodsReason, "")}),
			code: http.StatusTooManyRequests, message: tooMany, cause: "The disruption budget web needs 3 healthy pods and has 2 currently"},
		{name: "refused with a reason", pdb: evictBudget("web", policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 4, DesiredHealthy: 3,
			Conditions: falseCond("Paused", "maintenance")}),
			code: http.StatusTooManyRequests, message: tooMany, cause: "The disruption budget web does not allow evicting pods currently (Paused): maintenance"},
		{name: "refused without a reason", pdb: evictBudget("web", policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 4, DesiredHealthy: 3}),
			code: http.StatusTooManyRequests, message: tooMany, cause: "The disruption budget web does not allow evicting pods currently"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.pdb.DeepCopy()
			got, err := takeDisruption(&tc.pdb, "p", evictNow)
			if got != nil || err == nil {
				t.Fatalf("takeDisruption = %v, %v; want a refusal", got, err)
			}
			se := err.(apierrors.APIStatus).Status()
			if se.Code != tc.code || se.Message != tc.message || se.Details.RetryAfterSeconds != tc.retryAfter {
				t.Errorf("status = %d %q retry %d; want %d %q retry %d", se.Code, se.Message, se.Details.RetryAfterSeconds, tc.code, tc.message, tc.retryAfter)
			}
			if c := budgetCause(t, err); c != tc.cause {
				t.Errorf("cause = %q, want %q", c, tc.cause)
			}
			if !reflect.DeepEqual(before, &tc.pdb) {
				t.Error("takeDisruption changed its argument")
			}
		})
	}

	for _, tc := range []struct {
		name            string
		allowed         int32
		wantReason      string
		conditionStatus metav1.ConditionStatus
	}{
		{"room for more", 2, policyv1.SufficientPodsReason, metav1.ConditionTrue},
		{"the last one", 1, policyv1.InsufficientPodsReason, metav1.ConditionFalse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pdb := evictBudget("web", policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 3, DesiredHealthy: 3 - tc.allowed, DisruptionsAllowed: tc.allowed,
				DisruptedPods: map[string]metav1.Time{"earlier": metav1.NewTime(evictNow.Add(-time.Second))},
				Conditions:    []metav1.Condition{{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionTrue, Reason: policyv1.SufficientPodsReason}}})
			got, err := takeDisruption(&pdb, "p", evictNow)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.DisruptionsAllowed != tc.allowed-1 || len(got.Status.DisruptedPods) != 2 || !got.Status.DisruptedPods["p"].Time.Equal(evictNow) {
				t.Errorf("status = %+v", got.Status)
			}
			c := apimeta.FindStatusCondition(got.Status.Conditions, policyv1.DisruptionAllowedCondition)
			if c.Reason != tc.wantReason || c.Status != tc.conditionStatus {
				t.Errorf("condition = %+v, want %s %s", c, tc.conditionStatus, tc.wantReason)
			}
			if pdb.Status.DisruptionsAllowed != tc.allowed || len(pdb.Status.DisruptedPods) != 1 {
				t.Error("takeDisruption changed its argument")
			}
		})
	}
}

func TestEvictionDeleteOptions(t *testing.T) {
	all := []string{metav1.DryRunAll}
	for _, tc := range []struct {
		name    string
		evOpts  *metav1.DeleteOptions
		reqDry  []string
		wantDry []string
		err     bool
	}{
		{"none", nil, nil, nil, false},
		{"request dry run", nil, all, all, false},
		{"eviction's own", &metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](5)}, all, all, false},
		{"eviction dry run", &metav1.DeleteOptions{DryRun: all}, nil, all, false},
		{"both", &metav1.DeleteOptions{DryRun: all}, all, all, false},
		{"contradicting", &metav1.DeleteOptions{DryRun: all}, []string{"Other"}, nil, true},
	} {
		ev := &policyv1.Eviction{DeleteOptions: tc.evOpts}
		got, err := evictionDeleteOptions(ev, &metav1.CreateOptions{DryRun: tc.reqDry})
		if (err != nil) != tc.err {
			t.Errorf("%s: err = %v", tc.name, err)
			continue
		}
		if err == nil && !reflect.DeepEqual(got.DryRun, tc.wantDry) {
			t.Errorf("%s: dryRun = %v, want %v", tc.name, got.DryRun, tc.wantDry)
		}
		if tc.evOpts != nil && err == nil && tc.evOpts.GracePeriodSeconds != nil && *got.GracePeriodSeconds != 5 {
			t.Errorf("%s: lost the eviction's options", tc.name)
		}
	}
}

// fakePods is evictionPods in memory, checking preconditions as the storage does.
type fakePods struct {
	mu      sync.Mutex
	pods    map[string]*corev1.Pod
	rv      int
	deletes []metav1.DeleteOptions
	// changeBeforeDelete moves a pod's resourceVersion right before its next delete,
	// as a kubelet reporting readiness would.
	changeBeforeDelete bool
}

func newFakePods(pods ...*corev1.Pod) *fakePods {
	f := &fakePods{pods: map[string]*corev1.Pod{}, rv: 100}
	for _, p := range pods {
		f.pods[p.Name] = p.DeepCopy()
	}
	return f
}

func (f *fakePods) get(_ context.Context, name string) (*corev1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pods[name]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
	}
	return p.DeepCopy(), nil
}

func (f *fakePods) markDisruptionTarget(_ context.Context, name string, pre *metav1.Preconditions) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pods[name]
	if !ok {
		return "", apierrors.NewNotFound(corev1.Resource("pods"), name)
	}
	if err := checkPreconditions(p, pre); err != nil {
		return "", err
	}
	setPodCondition(&p.Status, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI"})
	f.rv++
	p.ResourceVersion = strconv.Itoa(f.rv)
	return p.ResourceVersion, nil
}

func (f *fakePods) delete(_ context.Context, name string, opts *metav1.DeleteOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deletes = append(f.deletes, *opts.DeepCopy())
	p, ok := f.pods[name]
	if !ok {
		return apierrors.NewNotFound(corev1.Resource("pods"), name)
	}
	if f.changeBeforeDelete {
		f.rv++
		p.ResourceVersion = strconv.Itoa(f.rv)
	}
	if err := checkPreconditions(p, opts.Preconditions); err != nil {
		return err
	}
	if len(opts.DryRun) == 0 {
		delete(f.pods, name)
	}
	return nil
}

func (f *fakePods) gone(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.pods[name]
	return !ok
}

func (f *fakePods) disruptionTarget(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.pods[name].Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func newEvictor(pods *fakePods, budgets ...policyv1.PodDisruptionBudget) (evictor, *fake.Clientset) {
	var objs []runtime.Object
	for i := range budgets {
		objs = append(objs, &budgets[i])
	}
	client := fake.NewClientset(objs...)
	return evictor{pods: pods, pdbs: client.PolicyV1(), now: func() time.Time { return evictNow },
		backoff: wait.Backoff{Steps: 3, Duration: time.Millisecond, Factor: 1}}, client
}

func getBudget(t *testing.T, client *fake.Clientset, name string) *policyv1.PodDisruptionBudget {
	t.Helper()
	pdb, err := client.PolicyV1().PodDisruptionBudgets("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pdb
}

func budgetWrites(client *fake.Clientset) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "poddisruptionbudgets" && a.GetVerb() == "update" {
			n++
		}
	}
	return n
}

func succeeded(t *testing.T, obj runtime.Object, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("evict: %v", err)
	}
	if st, ok := obj.(*metav1.Status); !ok || st.Status != metav1.StatusSuccess {
		t.Fatalf("evict = %+v, want Success", obj)
	}
}

func TestEvictWithinBudget(t *testing.T) {
	ctx := context.Background()
	pods := newFakePods(evictPod("p", corev1.PodRunning, true))
	e, client := newEvictor(pods, evictBudget("web", policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 3, DesiredHealthy: 2, DisruptionsAllowed: 1}))
	obj, err := e.evict(ctx, "p", &metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](7)})
	succeeded(t, obj, err)
	st := getBudget(t, client, "web").Status
	if st.DisruptionsAllowed != 0 || !st.DisruptedPods["p"].Time.Equal(evictNow) {
		t.Errorf("budget status = %+v, want 0 allowed and p disrupted", st)
	}
	if c := apimeta.FindStatusCondition(st.Conditions, policyv1.DisruptionAllowedCondition); c == nil || c.Reason != policyv1.InsufficientPodsReason {
		t.Errorf("condition = %+v", c)
	}
	if !pods.gone("p") || len(pods.deletes) != 1 || ptr.Deref(pods.deletes[0].GracePeriodSeconds, 0) != 7 || pods.deletes[0].Preconditions != nil {
		t.Errorf("deletes = %+v, want one with the eviction's options", pods.deletes)
	}
}

func TestEvictRefusedByBudget(t *testing.T) {
	ctx := context.Background()
	pods := newFakePods(evictPod("p", corev1.PodRunning, true))
	e, client := newEvictor(pods, evictBudget("web", policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 2, DesiredHealthy: 2}))
	_, err := e.evict(ctx, "p", &metav1.DeleteOptions{})
	if !apierrors.IsTooManyRequests(err) || err.Error() != "Cannot evict pod as it would violate the pod's disruption budget." {
		t.Fatalf("evict = %v, want 429", err)
	}
	if c := budgetCause(t, err); c != "The disruption budget web needs 2 healthy pods and has 2 currently" {
		t.Errorf("cause = %q", c)
	}
	if pods.gone("p") || len(pods.deletes) != 0 || pods.disruptionTarget("p") || budgetWrites(client) != 0 {
		t.Errorf("refused eviction touched something: deletes %v, budget writes %d", pods.deletes, budgetWrites(client))
	}
}

func TestEvictWithTwoBudgets(t *testing.T) {
	pods := newFakePods(evictPod("p", corev1.PodRunning, true))
	allow := policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 3, DesiredHealthy: 1, DisruptionsAllowed: 2}
	e, client := newEvictor(pods, evictBudget("a", allow), evictBudget("b", allow))
	obj, err := e.evict(context.Background(), "p", &metav1.DeleteOptions{})
	st, ok := obj.(*metav1.Status)
	if err != nil || !ok || st.Code != 500 || st.Status != metav1.StatusFailure ||
		st.Message != "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support." {
		t.Fatalf("evict = %+v, %v", obj, err)
	}
	if pods.gone("p") || budgetWrites(client) != 0 {
		t.Error("eviction with two budgets went on")
	}
}

func TestEvictWithoutBudget(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		wantRV  bool // delete preconditioned on the pod seen
		budgets []policyv1.PodDisruptionBudget
	}{
		{"no budget", evictPod("p", corev1.PodRunning, true), false, nil},
		{"succeeded pod, closed budget", evictPod("p", corev1.PodSucceeded, false), false,
			[]policyv1.PodDisruptionBudget{evictBudget("web", policyv1.PodDisruptionBudgetStatus{})}},
		{"pending pod, closed budget", evictPod("p", corev1.PodPending, false), true,
			[]policyv1.PodDisruptionBudget{evictBudget("web", policyv1.PodDisruptionBudgetStatus{})}},
		{"terminating pod, closed budget", func() *corev1.Pod {
			p := evictPod("p", corev1.PodRunning, true)
			p.DeletionTimestamp = ptr.To(metav1.NewTime(evictNow))
			return p
		}(), false, []policyv1.PodDisruptionBudget{evictBudget("web", policyv1.PodDisruptionBudgetStatus{})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := newFakePods(tc.pod)
			e, client := newEvictor(pods, tc.budgets...)
			obj, err := e.evict(context.Background(), "p", &metav1.DeleteOptions{})
			succeeded(t, obj, err)
			if !pods.gone("p") || budgetWrites(client) != 0 {
				t.Errorf("gone %t, budget writes %d", pods.gone("p"), budgetWrites(client))
			}
			hasRV := pods.deletes[0].Preconditions != nil && pods.deletes[0].Preconditions.ResourceVersion != nil
			if hasRV != tc.wantRV {
				t.Errorf("delete preconditions = %+v, want a resourceVersion: %t", pods.deletes[0].Preconditions, tc.wantRV)
			}
		})
	}
}

func TestEvictUnhealthyPod(t *testing.T) {
	ctx := context.Background()
	healthy := policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 3, DesiredHealthy: 3}
	pods := newFakePods(evictPod("p", corev1.PodRunning, false))
	e, client := newEvictor(pods, evictBudget("web", healthy))
	obj, err := e.evict(ctx, "p", &metav1.DeleteOptions{})
	succeeded(t, obj, err)
	if budgetWrites(client) != 0 {
		t.Error("an unhealthy pod spent a disruption")
	}
	if pre := pods.deletes[0].Preconditions; pre == nil || pre.ResourceVersion == nil {
		t.Errorf("delete of an unhealthy pod without a resourceVersion precondition: %+v", pods.deletes[0])
	}

	// The pod changed (became ready?) between the read and the delete: 429.
	pods = newFakePods(evictPod("p", corev1.PodRunning, false))
	pods.changeBeforeDelete = true
	e, _ = newEvictor(pods, evictBudget("web", healthy))
	_, err = e.evict(ctx, "p", &metav1.DeleteOptions{})
	if !apierrors.IsTooManyRequests(err) || budgetCause(t, err) != "The disruption budget web is still being processed by the server." {
		t.Fatalf("evict = %v, want 429 still being processed", err)
	}
	if pods.gone("p") {
		t.Error("changed pod deleted")
	}
}

func TestEvictDryRun(t *testing.T) {
	pods := newFakePods(evictPod("p", corev1.PodRunning, true))
	e, client := newEvictor(pods, evictBudget("web", policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 3, DesiredHealthy: 2, DisruptionsAllowed: 1}))
	obj, err := e.evict(context.Background(), "p", &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	succeeded(t, obj, err)
	if pods.gone("p") || pods.disruptionTarget("p") || budgetWrites(client) != 0 {
		t.Errorf("dry run changed something: gone %t, budget writes %d", pods.gone("p"), budgetWrites(client))
	}
	if len(pods.deletes) != 1 || len(pods.deletes[0].DryRun) != 1 {
		t.Errorf("deletes = %+v, want one dry run", pods.deletes)
	}
}

func TestEvictRetriesBudgetConflicts(t *testing.T) {
	pods := newFakePods(evictPod("p", corev1.PodRunning, true))
	e, client := newEvictor(pods, evictBudget("web", policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 4, DesiredHealthy: 2, DisruptionsAllowed: 2}))
	// Someone else evicts first: the first write loses, the budget read again has 1 left.
	first := true
	client.PrependReactor("update", "poddisruptionbudgets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if !first {
			return false, nil, nil
		}
		first = false
		gvr := policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets")
		obj, err := client.Tracker().Get(gvr, "ns", "web")
		if err != nil {
			return true, nil, err
		}
		other := obj.(*policyv1.PodDisruptionBudget).DeepCopy()
		other.Status.DisruptionsAllowed = 1
		other.Status.DisruptedPods = map[string]metav1.Time{"other": metav1.NewTime(evictNow)}
		if err := client.Tracker().Update(gvr, other, "ns"); err != nil {
			return true, nil, err
		}
		return true, nil, apierrors.NewConflict(policyv1.Resource("poddisruptionbudgets"), "web", errors.New("changed"))
	})
	obj, err := e.evict(context.Background(), "p", &metav1.DeleteOptions{})
	succeeded(t, obj, err)
	st := getBudget(t, client, "web").Status
	if st.DisruptionsAllowed != 0 || len(st.DisruptedPods) != 2 {
		t.Errorf("budget status = %+v, want 0 allowed, other and p disrupted", st)
	}
	if !pods.gone("p") {
		t.Error("pod not deleted")
	}

	// A budget that keeps conflicting ends the eviction with the conflict.
	pods = newFakePods(evictPod("p", corev1.PodRunning, true))
	e, client = newEvictor(pods, evictBudget("web", policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 4, DesiredHealthy: 2, DisruptionsAllowed: 2}))
	client.PrependReactor("update", "poddisruptionbudgets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(policyv1.Resource("poddisruptionbudgets"), "web", errors.New("changed"))
	})
	if _, err := e.evict(context.Background(), "p", &metav1.DeleteOptions{}); !apierrors.IsConflict(err) || pods.gone("p") {
		t.Errorf("evict = %v (pod gone %t), want the conflict and the pod kept", err, pods.gone("p"))
	}
}

func TestEvictMarksDisruptionTarget(t *testing.T) {
	// Precondition on the resourceVersion given by the caller: checked against the pod
	// before the condition, and moved past the condition's write for the delete.
	pods := newFakePods(evictPod("p", corev1.PodRunning, true))
	e, _ := newEvictor(pods)
	obj, err := e.evict(context.Background(), "p", &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: ptr.To("10")}})
	succeeded(t, obj, err)
	if got := *pods.deletes[0].Preconditions.ResourceVersion; got != "101" {
		t.Errorf("delete precondition resourceVersion = %s, want the condition's 101", got)
	}
	pods = newFakePods(evictPod("p", corev1.PodRunning, true))
	e, _ = newEvictor(pods)
	_, err = e.evict(context.Background(), "p", &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: ptr.To("9")}})
	if !apierrors.IsConflict(err) || pods.disruptionTarget("p") || pods.gone("p") {
		t.Errorf("stale precondition: %v, marked %t", err, pods.disruptionTarget("p"))
	}
}
