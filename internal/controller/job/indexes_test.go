package job

import (
	"reflect"
	"strconv"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestIntervalsParseAndString(t *testing.T) {
	for _, tc := range []struct {
		in          string
		completions int
		want        intervals
		str         string
	}{
		{"", 5, nil, ""},
		{"0", 5, intervals{{0, 0}}, "0"},
		{"0,1", 5, intervals{{0, 1}}, "0,1"},
		{"0-2,4", 5, intervals{{0, 2}, {4, 4}}, "0-2,4"},
		{"1,2,3,7-9", 10, intervals{{1, 3}, {7, 9}}, "1-3,7-9"},
		{"1-3,x,5", 10, intervals{{1, 3}, {5, 5}}, "1-3,5"},
		{"2-8,9", 5, intervals{{2, 4}}, "2-4"},
		{"7", 5, nil, ""},
	} {
		got := parseIntervals(tc.in, tc.completions)
		if !reflect.DeepEqual(got, tc.want) || got.String() != tc.str {
			t.Errorf("parseIntervals(%q, %d) = %v (%q), want %v (%q)", tc.in, tc.completions, got, got.String(), tc.want, tc.str)
		}
	}
}

func TestIntervalsOps(t *testing.T) {
	iv := intervals{{1, 3}, {7, 7}}
	if iv.total() != 4 {
		t.Errorf("total = %d, want 4", iv.total())
	}
	for ix, want := range map[int]bool{0: false, 1: true, 3: true, 4: false, 7: true, 8: false} {
		if iv.has(ix) != want {
			t.Errorf("has(%d) = %v, want %v", ix, !want, want)
		}
	}
	if got := iv.withIndexes([]int{0, 4, 5, 9}).String(); got != "0-5,7,9" {
		t.Errorf("withIndexes = %q, want 0-5,7,9", got)
	}
	if got := iv.merge(intervals{{2, 8}, {10, 11}}).String(); got != "1-8,10,11" {
		t.Errorf("merge = %q, want 1-8,10,11", got)
	}
	if got := (intervals{}).merge(nil); got != nil {
		t.Errorf("empty merge = %v", got)
	}
}

func indexedPod(name string, ix int, phase corev1.PodPhase, finalizer bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name),
		Annotations: map[string]string{batchv1.JobCompletionIndexAnnotation: strconv.Itoa(ix)}}, Status: corev1.PodStatus{Phase: phase}}
	if ix == noIndex {
		p.Annotations = nil
	}
	if finalizer {
		p.Finalizers = []string{batchv1.JobTrackingFinalizer}
	}
	return p
}

func TestFirstPendingIndexes(t *testing.T) {
	for _, tc := range []struct {
		name         string
		count, total int
		active, term []*corev1.Pod
		succeeded    intervals
		failed       *intervals
		want         []int
	}{
		{name: "none taken", count: 3, total: 5, want: []int{0, 1, 2}},
		{name: "skips active and succeeded", count: 3, total: 6,
			active: []*corev1.Pod{indexedPod("a", 1, corev1.PodRunning, true)}, succeeded: intervals{{0, 0}, {3, 3}},
			want: []int{2, 4, 5}},
		{name: "terminating and failed held", count: 5, total: 5,
			term: []*corev1.Pod{indexedPod("t", 0, corev1.PodRunning, true)}, failed: &intervals{{2, 3}},
			want: []int{1, 4}},
		{name: "capped by completions", count: 10, total: 2, want: []int{0, 1}},
		{name: "nothing", count: 0, total: 2},
	} {
		got := firstPendingIndexes(tc.count, tc.total, tc.active, tc.term, tc.succeeded, tc.failed)
		if !reflect.DeepEqual(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			t.Errorf("%s: firstPendingIndexes = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSucceededAndFailedIndexes(t *testing.T) {
	job := newJob("j", indexed(), completions(5), func(j *batchv1.Job) {
		j.Status.CompletedIndexes = "0"
		j.Status.FailedIndexes = ptr.To("4")
		j.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
	})
	failedOnce := indexedPod("f1", 2, corev1.PodFailed, true)
	failedTwice := indexedPod("f2", 3, corev1.PodFailed, true)
	failedTwice.Annotations[batchv1.JobIndexFailureCountAnnotation] = "1"
	pods := []*corev1.Pod{
		indexedPod("s1", 1, corev1.PodSucceeded, true),
		indexedPod("s-counted", 3, corev1.PodSucceeded, false), // no finalizer: counted before
		indexedPod("s-out", 7, corev1.PodSucceeded, true),      // beyond completions
		failedOnce, failedTwice,
	}
	prev, cur := succeededIndexes(job, pods)
	if prev.String() != "0" || cur.String() != "0,1" {
		t.Errorf("succeeded indexes prev %q cur %q, want 0 and 0,1", prev, cur)
	}
	if got := failedIndexes(job, pods).String(); got != "3,4" {
		t.Errorf("failed indexes %q, want 3,4 (index 2 may still retry)", got)
	}
}

func TestDuplicateIndexPods(t *testing.T) {
	a := indexedPod("a", 0, corev1.PodRunning, true)
	b := indexedPod("b", 0, corev1.PodPending, true)
	c := indexedPod("c", 1, corev1.PodRunning, true)
	none := indexedPod("none", noIndex, corev1.PodRunning, true)
	out := indexedPod("out", 9, corev1.PodRunning, true)
	rm, keep := duplicateIndexPods([]*corev1.Pod{a, b, c, none, out}, 3)
	if got, want := podNames(rm), []string{"none", "out", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("removed %v, want %v (no index, out of range, then the pending duplicate)", got, want)
	}
	if got, want := podNames(keep), []string{"a", "c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("kept %v, want %v", got, want)
	}
}

func podNames(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}
