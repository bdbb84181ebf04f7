package deployment

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func TestFenceposts(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(n int) *intstr.IntOrString { v := intstr.FromInt(n); return &v }
	for _, tc := range []struct {
		surge, unavail            *intstr.IntOrString
		replicas                  int32
		wantSurge, wantUnavailabe int32
	}{
		{pct("25%"), pct("25%"), 3, 1, 0}, // surge rounds up, unavailable down
		{pct("25%"), pct("25%"), 4, 1, 1},
		{pct("25%"), pct("25%"), 10, 3, 2},
		{num(0), num(0), 5, 0, 1}, // both zero: one unavailable so it can move
		{num(2), pct("50%"), 5, 2, 2},
		{nil, nil, 3, 0, 1},
	} {
		s, u, err := fenceposts(tc.surge, tc.unavail, tc.replicas)
		if err != nil || s != tc.wantSurge || u != tc.wantUnavailabe {
			t.Errorf("fenceposts(%v, %v, %d) = %d, %d, %v; want %d, %d", tc.surge, tc.unavail, tc.replicas, s, u, err, tc.wantSurge, tc.wantUnavailabe)
		}
	}
	if _, _, err := fenceposts(pct("lots"), nil, 3); err == nil {
		t.Error("a malformed percentage is accepted")
	}
}

func rs(name string, created int64, spec, avail int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(created, 0)), Annotations: map[string]string{}},
		Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To(spec)},
		Status:     appsv1.ReplicaSetStatus{Replicas: spec, AvailableReplicas: avail, ReadyReplicas: avail},
	}
}

func TestNewRSReplicas(t *testing.T) {
	for _, tc := range []struct {
		name            string
		replicas, surge int32
		olds            []*appsv1.ReplicaSet
		newRS           *appsv1.ReplicaSet
		want            int32
	}{
		{"first rollout", 3, 1, nil, rs("new", 2, 0, 0), 3},
		{"surge by one", 3, 1, []*appsv1.ReplicaSet{rs("old", 1, 3, 3)}, rs("new", 2, 0, 0), 1},
		{"at max total", 3, 1, []*appsv1.ReplicaSet{rs("old", 1, 3, 3)}, rs("new", 2, 1, 0), 1},
		{"old shrank", 3, 1, []*appsv1.ReplicaSet{rs("old", 1, 2, 2)}, rs("new", 2, 1, 1), 2},
		{"never above replicas", 3, 5, []*appsv1.ReplicaSet{rs("old", 1, 1, 1)}, rs("new", 2, 2, 2), 3},
		{"too big shrinks", 3, 1, nil, rs("new", 2, 5, 5), 3},
		{"creating", 10, 3, []*appsv1.ReplicaSet{rs("old", 1, 10, 10)}, nil, 3},
	} {
		all := append([]*appsv1.ReplicaSet(nil), tc.olds...)
		if tc.newRS != nil {
			all = append(all, tc.newRS)
		}
		if got := newRSReplicas(tc.replicas, tc.surge, all, tc.newRS); got != tc.want {
			t.Errorf("%s: newRSReplicas = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestOldScaleDown(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		replicas, unavailable int32
		newRS                 *appsv1.ReplicaSet
		olds                  []*appsv1.ReplicaSet
		want                  map[string]int32
	}{
		{"new not available yet: keep old", 3, 0, rs("new", 9, 1, 0), []*appsv1.ReplicaSet{rs("old", 1, 3, 3)}, map[string]int32{}},
		{"new available: one old goes", 3, 0, rs("new", 9, 1, 1), []*appsv1.ReplicaSet{rs("old", 1, 3, 3)}, map[string]int32{"old": 2}},
		{"maxUnavailable lets two go", 4, 2, rs("new", 9, 0, 0), []*appsv1.ReplicaSet{rs("old", 1, 4, 4)}, map[string]int32{"old": 2}},
		{"unhealthy old replicas go first", 3, 0, rs("new", 9, 1, 0), []*appsv1.ReplicaSet{rs("old", 1, 3, 2)}, map[string]int32{}},
		{"unhealthy go free when there is room", 3, 1, rs("new", 9, 1, 1), []*appsv1.ReplicaSet{rs("old", 1, 3, 1)}, map[string]int32{"old": 1}},
		{"oldest first", 4, 1, rs("new", 9, 2, 2), []*appsv1.ReplicaSet{rs("b", 5, 2, 2), rs("a", 1, 1, 1)}, map[string]int32{"a": 0, "b": 1}},
		{"nothing old", 3, 1, rs("new", 9, 3, 3), []*appsv1.ReplicaSet{rs("old", 1, 0, 0)}, map[string]int32{}},
		{"all old when new is full", 3, 0, rs("new", 9, 3, 3), []*appsv1.ReplicaSet{rs("old", 1, 1, 1)}, map[string]int32{"old": 0}},
		{"stale status above spec is not trusted", 3, 0, rs("new", 9, 1, 1), []*appsv1.ReplicaSet{rs("old", 1, 2, 3)}, map[string]int32{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "stale status above spec is not trusted" {
				tc.olds[0].Status.AvailableReplicas = 3 // spec 2, status still says 3
				tc.newRS.Status.AvailableReplicas = 1
			}
			got := oldScaleDown(tc.replicas, tc.unavailable, tc.newRS, tc.olds)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("oldScaleDown = %v, want %v", got, tc.want)
			}
			// Whatever it plans, what stays available never drops below the minimum.
			left := min(tc.newRS.Status.AvailableReplicas, specReplicas(tc.newRS))
			for _, o := range tc.olds {
				size := specReplicas(o)
				if n, ok := got[o.Name]; ok {
					size = n
				}
				left += min(available(o), size)
			}
			before := min(tc.newRS.Status.AvailableReplicas, specReplicas(tc.newRS))
			for _, o := range tc.olds {
				before += available(o)
			}
			if floor := tc.replicas - tc.unavailable; left < floor && left < before {
				t.Errorf("plan leaves %d available, below %d", left, floor)
			}
		})
	}
}

func TestProportionalScale(t *testing.T) {
	withMax := func(r *appsv1.ReplicaSet, m string) *appsv1.ReplicaSet {
		r.Annotations[MaxReplicasAnnotation] = m
		return r
	}
	ann := func(r *appsv1.ReplicaSet) (int32, bool) { return annotatedInt(r, MaxReplicasAnnotation) }
	for _, tc := range []struct {
		name   string
		max    int32
		active []*appsv1.ReplicaSet
		want   map[string]int32
	}{
		// Upstream's example: 10 replicas, surge 3 mid-rollout (8 old, 5 new), scaled to
		// 15 (surge 3 → max 18): 8*18/13 ≈ 11, 5*18/13 ≈ 7.
		{"scale up mid-rollout", 18, []*appsv1.ReplicaSet{withMax(rs("old", 1, 8, 8), "13"), withMax(rs("new", 2, 5, 0), "13")},
			map[string]int32{"old": 11, "new": 7}},
		{"scale down mid-rollout", 6, []*appsv1.ReplicaSet{withMax(rs("old", 1, 8, 8), "13"), withMax(rs("new", 2, 5, 0), "13")},
			map[string]int32{"old": 4, "new": 2}},
		{"no annotation: by share", 12, []*appsv1.ReplicaSet{rs("a", 1, 4, 4), rs("b", 2, 4, 4)},
			map[string]int32{"a": 6, "b": 6}},
		{"nothing to do", 8, []*appsv1.ReplicaSet{rs("a", 1, 4, 4), rs("b", 2, 4, 4)}, map[string]int32{}},
	} {
		got := proportionalScale(tc.max, tc.active, ann)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: proportionalScale = %v, want %v", tc.name, got, tc.want)
		}
		var total int32
		for _, r := range tc.active {
			if n, ok := got[r.Name]; ok {
				total += n
			} else {
				total += specReplicas(r)
			}
		}
		if total != tc.max {
			t.Errorf("%s: sizes sum to %d, want %d", tc.name, total, tc.max)
		}
	}
}

func TestHistoryToDelete(t *testing.T) {
	old := func(name, rev string, spec int32) *appsv1.ReplicaSet {
		r := rs(name, 1, spec, spec)
		r.Annotations[RevisionAnnotation] = rev
		return r
	}
	olds := []*appsv1.ReplicaSet{old("r3", "3", 0), old("r1", "1", 0), old("r2", "2", 0), old("r4", "4", 2)}
	var got []string
	for _, r := range historyToDelete(olds, 2) {
		got = append(got, r.Name)
	}
	if want := []string{"r1", "r2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("historyToDelete(limit 2) = %v, want %v", got, want)
	}
	if got := historyToDelete(olds, 0); len(got) != 3 {
		t.Errorf("limit 0 deletes %d, want the 3 empty ones (never a live one)", len(got))
	}
	if got := historyToDelete(olds, 10); got != nil {
		t.Errorf("under the limit deletes %v", got)
	}
}

func TestTemplateHashAndEquality(t *testing.T) {
	a := &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}}
	b := a.DeepCopy()
	b.Spec.Containers[0].Image = "nginx:1.28"
	if templateHash(a, nil) != templateHash(a.DeepCopy(), nil) {
		t.Error("hash is not stable")
	}
	if templateHash(a, nil) == templateHash(b, nil) {
		t.Error("different templates hash alike")
	}
	if templateHash(a, nil) == templateHash(a, ptr.To[int32](1)) {
		t.Error("collisionCount does not change the hash")
	}
	for _, r := range templateHash(a, nil) {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			t.Fatalf("hash %q is not a DNS label part", templateHash(a, nil))
		}
	}
	hashed := a.DeepCopy()
	hashed.Labels[PodTemplateHashLabel] = "abc"
	if !equalIgnoreHash(a, hashed) {
		t.Error("templates differing only by pod-template-hash are not equal")
	}
	if equalIgnoreHash(a, b) {
		t.Error("templates with different images are equal")
	}
}

func TestSetNewRSAnnotations(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		"team": "x", lastAppliedConfigAnnotation: "{}", RevisionAnnotation: "7"}}}
	r := rs("r", 1, 1, 1)
	if !setNewRSAnnotations(d, r, 1) {
		t.Fatal("no change reported on a fresh ReplicaSet")
	}
	if r.Annotations["team"] != "x" || r.Annotations[RevisionAnnotation] != "1" || r.Annotations[lastAppliedConfigAnnotation] != "" {
		t.Errorf("annotations = %v", r.Annotations)
	}
	if setNewRSAnnotations(d, r, 1) {
		t.Error("change reported when nothing changed")
	}
	// Rolled back to: revision 1 becomes 4, and 1 goes to the history.
	setNewRSAnnotations(d, r, 4)
	if r.Annotations[RevisionAnnotation] != "4" || r.Annotations[RevisionHistoryAnnotation] != "1" {
		t.Errorf("after rollback annotations = %v", r.Annotations)
	}
	setNewRSAnnotations(d, r, 6)
	if r.Annotations[RevisionHistoryAnnotation] != "1,4" {
		t.Errorf("revision-history = %q, want 1,4", r.Annotations[RevisionHistoryAnnotation])
	}
}

func TestProgressingCondition(t *testing.T) {
	now := time.Unix(10000, 0)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](3), ProgressDeadlineSeconds: ptr.To[int32](600),
		Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType}}}
	newRS := rs("web-abc", 1, 3, 3)
	st := appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}
	progressing(d, newRS, &st, now)
	if c := getCondition(&st, appsv1.DeploymentProgressing); c == nil || c.Reason != ReasonNewRSAvailable || c.Status != corev1.ConditionTrue ||
		c.Message != `ReplicaSet "web-abc" has successfully progressed.` {
		t.Fatalf("complete rollout: %+v", c)
	}
	// Progress moves lastUpdateTime; no progress for longer than the deadline fails.
	d.Status = appsv1.DeploymentStatus{Replicas: 4, UpdatedReplicas: 1}
	st = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 4, UpdatedReplicas: 2}
	if after := progressing(d, newRS, &st, now); after != 600*time.Second {
		t.Errorf("recheck after %v, want the deadline", after)
	}
	if c := getCondition(&st, appsv1.DeploymentProgressing); c == nil || c.Reason != ReasonRSUpdated {
		t.Fatalf("progress: %+v", c)
	}
	d.Status = st
	later := now.Add(601 * time.Second)
	progressing(d, newRS, &st, later)
	if c := getCondition(&st, appsv1.DeploymentProgressing); c == nil || c.Reason != ReasonTimedOut || c.Status != corev1.ConditionFalse {
		t.Fatalf("after the deadline: %+v", c)
	}
	// Paused Deployments are not judged.
	d.Spec.Paused = true
	st2 := appsv1.DeploymentStatus{}
	if progressing(d, newRS, &st2, later); len(st2.Conditions) != 0 {
		t.Errorf("paused deployment got %+v", st2.Conditions)
	}
}

func TestComputeStatus(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 5}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](4),
		Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxSurge: ptr.To(intstr.FromInt(1)), MaxUnavailable: ptr.To(intstr.FromInt(1))}}}}
	newRS, old := rs("new", 2, 2, 1), rs("old", 1, 3, 2)
	st := computeStatus(d, newRS, []*appsv1.ReplicaSet{old, newRS}, time.Unix(1, 0))
	if st.Replicas != 5 || st.UpdatedReplicas != 2 || st.AvailableReplicas != 3 || st.UnavailableReplicas != 2 || st.ObservedGeneration != 5 {
		t.Errorf("status = %+v", st)
	}
	if c := getCondition(&st, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonMinimumAvailable {
		t.Errorf("3 available of 4 with maxUnavailable 1: %+v", c)
	}
	old.Status.AvailableReplicas = 1
	st = computeStatus(d, newRS, []*appsv1.ReplicaSet{old, newRS}, time.Unix(1, 0))
	if c := getCondition(&st, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonMinimumUnavailable {
		t.Errorf("2 available of 4 with maxUnavailable 1: %+v", c)
	}
}
