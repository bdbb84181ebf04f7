package disruption

import (
	"errors"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

type podOpt func(*corev1.Pod)

func mkPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app": "web"}}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func ready(p *corev1.Pod) {
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
}

func deleting(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }

func ownedBy(apiVersion, kind, name string, uid types.UID) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
	}
}

func minAvailable(v intstr.IntOrString) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &v}}
}

func maxUnavailable(v intstr.IntOrString) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &v}}
}

func TestExpectedPods(t *testing.T) {
	// The scales the finder knows, by controller UID.
	scales := map[types.UID]int32{"rs": 7, "rs10": 10, "ss": 2}
	find := func(ref *metav1.OwnerReference, _ string) (*scale, error) {
		if ref.Kind == "Broken" {
			return nil, errors.New("broken")
		}
		if n, ok := scales[ref.UID]; ok {
			return &scale{uid: ref.UID, replicas: n}, nil
		}
		return nil, nil
	}
	ofRS := ownedBy("apps/v1", "ReplicaSet", "rs", "rs")
	for _, tc := range []struct {
		name              string
		pdb               *policyv1.PodDisruptionBudget
		pods              []*corev1.Pod
		expected, desired int32
		unmanaged         []string
		err               string
	}{
		{name: "integer minAvailable counts the pods", pdb: minAvailable(intstr.FromInt32(3)),
			pods: []*corev1.Pod{mkPod("a"), mkPod("b"), mkPod("c"), mkPod("d")}, expected: 4, desired: 3},
		{name: "integer minAvailable ignores controllers", pdb: minAvailable(intstr.FromInt32(1)),
			pods: []*corev1.Pod{mkPod("a", ownedBy("x/v1", "Unknown", "u", "u"))}, expected: 1, desired: 1},
		{name: "percentage minAvailable of a naked pod", pdb: minAvailable(intstr.FromString("28%")),
			pods: []*corev1.Pod{mkPod("naked")}, unmanaged: []string{"naked"}},
		{name: "percentage minAvailable rounds up", pdb: minAvailable(intstr.FromString("20%")),
			pods: []*corev1.Pod{mkPod("a", ownedBy("apps/v1", "ReplicaSet", "rs10", "rs10"))}, expected: 10, desired: 2},
		{name: "integer maxUnavailable", pdb: maxUnavailable(intstr.FromInt32(2)),
			pods: []*corev1.Pod{mkPod("a", ofRS)}, expected: 7, desired: 5},
		{name: "percentage maxUnavailable rounds up", pdb: maxUnavailable(intstr.FromString("30%")),
			pods: []*corev1.Pod{mkPod("a", ofRS)}, expected: 7, desired: 4},
		{name: "maxUnavailable above the scale", pdb: maxUnavailable(intstr.FromInt32(9)),
			pods: []*corev1.Pod{mkPod("a", ofRS)}, expected: 7, desired: 0},
		{name: "maxUnavailable with no pods", pdb: maxUnavailable(intstr.FromInt32(1))},
		{name: "a controller counts once, controllers add up", pdb: maxUnavailable(intstr.FromInt32(1)),
			pods:     []*corev1.Pod{mkPod("a", ofRS), mkPod("b", ofRS), mkPod("c", ownedBy("apps/v1", "StatefulSet", "ss", "ss")), mkPod("d")},
			expected: 9, desired: 8, unmanaged: []string{"d"}},
		{name: "unknown controller", pdb: maxUnavailable(intstr.FromInt32(1)),
			pods: []*corev1.Pod{mkPod("p", ownedBy("apps/v1", "DaemonSet", "ds", "ds"))}, err: `found no controllers for pod "p"`},
		{name: "finder error", pdb: minAvailable(intstr.FromString("50%")),
			pods: []*corev1.Pod{mkPod("p", ownedBy("x/v1", "Broken", "b", "b"))}, err: "broken"},
		{name: "bad percentage", pdb: maxUnavailable(intstr.FromString("many")),
			pods: []*corev1.Pod{mkPod("a", ofRS)}, err: "invalid value for IntOrString: invalid type: string is not a percentage"},
		{name: "neither set", pdb: &policyv1.PodDisruptionBudget{}, pods: []*corev1.Pod{mkPod("a")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expected, desired, unmanaged, err := expectedPods(tc.pdb, tc.pods, find)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if expected != tc.expected || desired != tc.desired || !reflect.DeepEqual(unmanaged, tc.unmanaged) {
				t.Errorf("expected, desired, unmanaged = %d, %d, %v; want %d, %d, %v", expected, desired, unmanaged, tc.expected, tc.desired, tc.unmanaged)
			}
		})
	}
}

func TestScaleListers(t *testing.T) {
	idx := func(objs ...interface{}) cache.Indexer {
		i := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		for _, o := range objs {
			if err := i.Add(o); err != nil {
				t.Fatal(err)
			}
		}
		return i
	}
	meta := func(name string, uid types.UID) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid}
	}
	dep := &appsv1.Deployment{ObjectMeta: meta("d", "d-uid"), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](5)}}
	rsOfDep := &appsv1.ReplicaSet{ObjectMeta: meta("d-1", "d1-uid"), Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3)}}
	rsOfDep.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "d", UID: "d-uid", Controller: ptr.To(true)}}
	rsOfGone := &appsv1.ReplicaSet{ObjectMeta: meta("gone-1", "g1-uid"), Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3)}}
	rsOfGone.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "gone", UID: "gone-uid", Controller: ptr.To(true)}}
	l := scaleListers{
		rcs:          corelisters.NewReplicationControllerLister(idx(&corev1.ReplicationController{ObjectMeta: meta("rc", "rc-uid"), Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](4)}})),
		deployments:  appslisters.NewDeploymentLister(idx(dep)),
		replicaSets:  appslisters.NewReplicaSetLister(idx(rsOfDep, rsOfGone, &appsv1.ReplicaSet{ObjectMeta: meta("rs", "rs-uid"), Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](6)}})),
		statefulSets: appslisters.NewStatefulSetLister(idx(&appsv1.StatefulSet{ObjectMeta: meta("ss", "ss-uid"), Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2)}})),
	}
	for _, tc := range []struct {
		name string
		ref  metav1.OwnerReference
		want *scale
		err  bool
	}{
		{"replication controller", metav1.OwnerReference{APIVersion: "v1", Kind: "ReplicationController", Name: "rc", UID: "rc-uid"}, &scale{"rc-uid", 4}, false},
		{"deployment through its replica set", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "d-1", UID: "d1-uid"}, &scale{"d-uid", 5}, false},
		{"replica set of a deployment not found", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "gone-1", UID: "g1-uid"}, nil, false},
		{"replica set alone", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid"}, &scale{"rs-uid", 6}, false},
		{"replica set of extensions", metav1.OwnerReference{APIVersion: "extensions/v1beta1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid"}, &scale{"rs-uid", 6}, false},
		{"stateful set", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "ss", UID: "ss-uid"}, &scale{"ss-uid", 2}, false},
		{"other uid", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "ss", UID: "old"}, nil, false},
		{"wrong group", metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "StatefulSet", Name: "ss", UID: "ss-uid"}, nil, false},
		{"other kind", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "ds-uid"}, nil, false},
		{"bad apiVersion", metav1.OwnerReference{APIVersion: "a/b/c", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid"}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := l.find(&tc.ref, "ns")
			if (err != nil) != tc.err || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("find = %+v, %v; want %+v (error %t)", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestLiveDisruptions(t *testing.T) {
	at := func(ago time.Duration) metav1.Time { return metav1.NewTime(t0.Add(-ago)) }
	pods := []*corev1.Pod{mkPod("recent"), mkPod("older"), mkPod("expired"), mkPod("deleting", deleting), mkPod("untouched")}
	disrupted := map[string]metav1.Time{
		"recent": at(30 * time.Second), "older": at(90 * time.Second), "expired": at(3 * time.Minute),
		"deleting": at(time.Second), "gone": at(time.Second),
	}
	kept, expired, recheck := liveDisruptions(pods, disrupted, t0)
	if want := map[string]metav1.Time{"recent": disrupted["recent"], "older": disrupted["older"]}; !reflect.DeepEqual(kept, want) {
		t.Errorf("kept = %v, want %v", kept, want)
	}
	if len(expired) != 1 || expired[0].Name != "expired" {
		t.Errorf("expired = %v, want [expired]", expired)
	}
	if want := t0.Add(30 * time.Second); recheck == nil || !recheck.Equal(want) {
		t.Errorf("recheck = %v, want %v (when older expires)", recheck, want)
	}
	kept, expired, recheck = liveDisruptions(pods, nil, t0)
	if len(kept) != 0 || kept == nil || expired != nil || recheck != nil {
		t.Errorf("no disruptions: %v %v %v", kept, expired, recheck)
	}
}

func TestCountHealthy(t *testing.T) {
	pods := []*corev1.Pod{
		mkPod("ready", ready),
		mkPod("unready"),
		mkPod("deleting", ready, deleting),
		mkPod("evicted", ready),
		mkPod("eviction-lapsed", ready),
		mkPod("not-ready-condition", func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		}),
	}
	disrupted := map[string]metav1.Time{"evicted": metav1.NewTime(t0.Add(-time.Minute)), "eviction-lapsed": metav1.NewTime(t0.Add(-3 * time.Minute))}
	if got := countHealthy(pods, disrupted, t0); got != 2 {
		t.Errorf("countHealthy = %d, want 2 (ready, eviction-lapsed)", got)
	}
}

func TestComputeStatus(t *testing.T) {
	cond := func(pdb *policyv1.PodDisruptionBudget) *metav1.Condition {
		return apimeta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
	}
	for _, tc := range []struct {
		name                       string
		current, desired, expected int32
		wantAllowed                int32
		wantStatus                 metav1.ConditionStatus
		wantReason                 string
	}{
		{"room for one", 4, 3, 4, 1, metav1.ConditionTrue, policyv1.SufficientPodsReason},
		{"exactly enough", 3, 3, 4, 0, metav1.ConditionFalse, policyv1.InsufficientPodsReason},
		{"too few", 1, 3, 4, 0, metav1.ConditionFalse, policyv1.InsufficientPodsReason},
		{"nothing expected", 2, 0, 0, 0, metav1.ConditionFalse, policyv1.InsufficientPodsReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
			disrupted := map[string]metav1.Time{"x": metav1.NewTime(t0)}
			got, changed := computeStatus(pdb, tc.current, tc.desired, tc.expected, disrupted)
			if !changed {
				t.Fatal("not changed")
			}
			st := got.Status
			if st.CurrentHealthy != tc.current || st.DesiredHealthy != tc.desired || st.ExpectedPods != tc.expected ||
				st.DisruptionsAllowed != tc.wantAllowed || st.ObservedGeneration != 3 || !reflect.DeepEqual(st.DisruptedPods, disrupted) {
				t.Errorf("status = %+v", st)
			}
			if c := cond(got); c == nil || c.Status != tc.wantStatus || c.Reason != tc.wantReason || c.ObservedGeneration != 3 {
				t.Errorf("DisruptionAllowed = %+v, want %s/%s", c, tc.wantStatus, tc.wantReason)
			}
			if pdb.Status.Conditions != nil {
				t.Error("computeStatus changed its argument")
			}
			// Computed again on the result, nothing changes.
			if again, changed := computeStatus(got, tc.current, tc.desired, tc.expected, disrupted); changed || again != got {
				t.Errorf("second computeStatus changed: %+v", again.Status)
			}
			// A new generation is a change.
			next := got.DeepCopy()
			next.Generation = 4
			if _, changed := computeStatus(next, tc.current, tc.desired, tc.expected, disrupted); !changed {
				t.Error("a new generation is not a change")
			}
		})
	}
	// A SyncFailed condition is replaced once the budget computes again.
	failed := failSafeStatus(&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Generation: 1},
		Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 0}}, errors.New("x"))
	got, changed := computeStatus(failed, 0, 0, 0, map[string]metav1.Time{})
	if c := cond(got); !changed || c.Reason != policyv1.InsufficientPodsReason {
		t.Errorf("after SyncFailed: changed %t condition %+v", changed, c)
	}
}

func TestFailSafeStatus(t *testing.T) {
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Generation: 5},
		Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 4, DisruptionsAllowed: 2, CurrentHealthy: 3, DesiredHealthy: 1}}
	got := failSafeStatus(pdb, errors.New(`found no controllers for pod "p"`))
	if got.Status.DisruptionsAllowed != 0 || got.Status.CurrentHealthy != 3 || got.Status.ObservedGeneration != 4 {
		t.Errorf("status = %+v", got.Status)
	}
	c := apimeta.FindStatusCondition(got.Status.Conditions, policyv1.DisruptionAllowedCondition)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != policyv1.SyncFailedReason ||
		c.Message != `found no controllers for pod "p"` || c.ObservedGeneration != 4 {
		t.Errorf("condition = %+v", c)
	}
	if pdb.Status.DisruptionsAllowed != 2 {
		t.Error("failSafeStatus changed its argument")
	}
}

func TestStaleDisruption(t *testing.T) {
	target := func(status corev1.ConditionStatus, reason string, ago time.Duration) podOpt {
		return func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: status,
				Reason: reason, LastTransitionTime: metav1.NewTime(t0.Add(-ago))})
		}
	}
	phase := func(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		stale bool
		after time.Duration
	}{
		{"no condition", mkPod("p", ready), false, 0},
		{"fresh eviction", mkPod("p", target(corev1.ConditionTrue, "EvictionByEvictionAPI", 30*time.Second)), true, 90 * time.Second},
		{"stale eviction", mkPod("p", target(corev1.ConditionTrue, "EvictionByEvictionAPI", 3*time.Minute)), true, 0},
		{"already false", mkPod("p", target(corev1.ConditionFalse, "", 3*time.Minute)), false, 0},
		{"set by the kubelet", mkPod("p", target(corev1.ConditionTrue, corev1.PodReasonTerminationByKubelet, 3*time.Minute)), false, 0},
		{"being deleted", mkPod("p", deleting, target(corev1.ConditionTrue, "EvictionByEvictionAPI", 3*time.Minute)), false, 0},
		{"failed", mkPod("p", phase(corev1.PodFailed), target(corev1.ConditionTrue, "EvictionByEvictionAPI", 3*time.Minute)), false, 0},
		{"succeeded", mkPod("p", phase(corev1.PodSucceeded), target(corev1.ConditionTrue, "EvictionByEvictionAPI", 3*time.Minute)), false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stale, after := staleDisruption(tc.pod, t0)
			if stale != tc.stale || after != tc.after {
				t.Errorf("staleDisruption = %t, %v; want %t, %v", stale, after, tc.stale, tc.after)
			}
		})
	}
	pod := mkPod("p", ready, target(corev1.ConditionTrue, "EvictionByEvictionAPI", 3*time.Minute))
	got := withoutDisruption(pod, t0)
	want := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0)}
	if len(got.Status.Conditions) != 2 || got.Status.Conditions[0].Type != corev1.PodReady || got.Status.Conditions[1] != want {
		t.Errorf("conditions = %+v", got.Status.Conditions)
	}
	if pod.Status.Conditions[1].Status != corev1.ConditionTrue {
		t.Error("withoutDisruption changed its argument")
	}
}
