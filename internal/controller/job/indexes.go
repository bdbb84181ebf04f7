package job

import (
	"sort"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// noIndex is the completion index of a pod without a valid one.
const noIndex = -1

// interval is the completion indexes first..last, both included.
type interval struct{ first, last int }

// intervals are disjoint, non-adjacent intervals in increasing order: the form of
// status.completedIndexes and status.failedIndexes ("1,3-5,7").
type intervals []interval

// parseIntervals reads an interval string, dropping what is not below completions and
// skipping malformed parts.
func parseIntervals(s string, completions int) intervals {
	if s == "" {
		return nil
	}
	var out intervals
	for _, part := range strings.Split(s, ",") {
		bounds := strings.Split(part, "-")
		first, err := strconv.Atoi(bounds[0])
		if err != nil {
			continue
		}
		if first >= completions {
			break
		}
		last := first
		if len(bounds) > 1 {
			if last, err = strconv.Atoi(bounds[1]); err != nil {
				continue
			}
			last = min(last, completions-1)
		}
		if n := len(out); n > 0 && out[n-1].last == first-1 {
			out[n-1].last = last
			continue
		}
		out = append(out, interval{first, last})
	}
	return out
}

// String writes the intervals as the API does: a pair of neighbours as "a,b", longer
// runs as "a-b".
func (iv intervals) String() string {
	var b strings.Builder
	for _, v := range iv {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(v.first))
		switch {
		case v.last == v.first+1:
			b.WriteByte(',')
			b.WriteString(strconv.Itoa(v.last))
		case v.last > v.first:
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(v.last))
		}
	}
	return b.String()
}

// total is how many indexes the intervals hold.
func (iv intervals) total() int {
	n := 0
	for _, v := range iv {
		n += v.last - v.first + 1
	}
	return n
}

// has says whether ix is in the intervals.
func (iv intervals) has(ix int) bool {
	i := sort.Search(len(iv), func(i int) bool { return iv[i].last >= ix })
	return i < len(iv) && iv[i].first <= ix
}

// withIndexes returns iv plus the indexes of sorted (in increasing order).
func (iv intervals) withIndexes(sorted []int) intervals {
	add := make(intervals, len(sorted))
	for i, ix := range sorted {
		add[i] = interval{ix, ix}
	}
	return iv.merge(add)
}

// merge returns the union of iv and other.
func (iv intervals) merge(other intervals) intervals {
	var out intervals
	push := func(v interval) {
		n := len(out)
		switch {
		case n == 0 || v.first > out[n-1].last+1:
			out = append(out, v)
		case v.last > out[n-1].last:
			out[n-1].last = v.last
		}
	}
	i, j := 0, 0
	for i < len(iv) && j < len(other) {
		if iv[i].first < other[j].first {
			push(iv[i])
			i++
		} else {
			push(other[j])
			j++
		}
	}
	for ; i < len(iv); i++ {
		push(iv[i])
	}
	for ; j < len(other); j++ {
		push(other[j])
	}
	return out
}

// completionIndex is the index in the pod's batch.kubernetes.io/job-completion-index
// annotation, or noIndex.
func completionIndex(pod *corev1.Pod) int {
	v, ok := pod.Annotations[batchv1.JobCompletionIndexAnnotation]
	if !ok {
		return noIndex
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 {
		return noIndex
	}
	return i
}

// validIndex says whether ix is an index of a Job of completions completions.
func validIndex(ix int, completions int32) bool {
	return ix != noIndex && ix < int(completions)
}

// succeededIndexes are the indexes status.completedIndexes names (prev) and those plus
// the indexes of succeeded pods not counted yet (cur).
func succeededIndexes(job *batchv1.Job, pods []*corev1.Pod) (prev, cur intervals) {
	completions := completionsOf(job)
	prev = parseIntervals(job.Status.CompletedIndexes, int(completions))
	fresh := sets.New[int]()
	for _, p := range pods {
		if ix := completionIndex(p); p.Status.Phase == corev1.PodSucceeded && validIndex(ix, completions) && hasTrackingFinalizer(p) {
			fresh.Insert(ix)
		}
	}
	return prev, prev.withIndexes(sets.List(fresh))
}

// failedIndexes are the indexes of status.failedIndexes plus those whose pod failed for
// good since (backoffLimitPerIndex reached, or a FailIndex rule matched).
func failedIndexes(job *batchv1.Job, pods []*corev1.Pod) intervals {
	completions := completionsOf(job)
	var prev intervals
	if job.Status.FailedIndexes != nil {
		prev = parseIntervals(*job.Status.FailedIndexes, int(completions))
	}
	fresh := sets.New[int]()
	for _, p := range pods {
		if ix := completionIndex(p); validIndex(ix, completions) && hasTrackingFinalizer(p) && indexFailed(job, p) {
			fresh.Insert(ix)
		}
	}
	return prev.withIndexes(sets.List(fresh))
}

// indexFailed says whether pod's failure fails its index.
func indexFailed(job *batchv1.Job, pod *corev1.Pod) bool {
	if !podFailed(pod, job) {
		return false
	}
	counted := true
	if job.Spec.PodFailurePolicy != nil {
		m := matchPodFailurePolicy(job.Spec.PodFailurePolicy, pod)
		if m.action != nil && *m.action == batchv1.PodFailurePolicyActionFailIndex {
			return true
		}
		counted = m.count
	}
	return counted && indexFailureCount(pod) >= *job.Spec.BackoffLimitPerIndex
}

// indexesOf are the valid completion indexes of pods.
func indexesOf(pods []*corev1.Pod) sets.Set[int] {
	out := sets.New[int]()
	for _, p := range pods {
		if ix := completionIndex(p); ix != noIndex {
			out.Insert(ix)
		}
	}
	return out
}

// firstPendingIndexes are the count lowest indexes below completions that no active pod
// runs and that have not succeeded or failed; terminating pods hold their index too when
// only failed pods are replaced.
func firstPendingIndexes(count, completions int, active, terminating []*corev1.Pod, succeeded intervals, failed *intervals) []int {
	if count <= 0 {
		return nil
	}
	taken := succeeded.withIndexes(sets.List(indexesOf(active)))
	if len(terminating) > 0 {
		taken = taken.withIndexes(sets.List(indexesOf(terminating)))
	}
	if failed != nil {
		taken = taken.merge(*failed)
	}
	out := make([]int, 0, count)
	next := 0
	for _, v := range taken {
		for ; next < completions && len(out) < count && next < v.first; next++ {
			out = append(out, next)
		}
		next = max(next, v.last+1)
	}
	for ; next < completions && len(out) < count; next++ {
		out = append(out, next)
	}
	return out
}

// indexFailureCount is the pod's batch.kubernetes.io/job-index-failure-count (0 when
// absent or invalid).
func indexFailureCount(pod *corev1.Pod) int32 {
	return annotationInt32(pod, batchv1.JobIndexFailureCountAnnotation)
}

// indexIgnoredFailureCount is the pod's batch.kubernetes.io/job-index-ignored-failure-count.
func indexIgnoredFailureCount(pod *corev1.Pod) int32 {
	return annotationInt32(pod, batchv1.JobIndexIgnoredFailureCountAnnotation)
}

func annotationInt32(pod *corev1.Pod, key string) int32 {
	v, err := strconv.ParseInt(pod.Annotations[key], 10, 32)
	if err != nil || v < 0 {
		return 0
	}
	return int32(v)
}

// replacementFailureCounts are the failure counts the pod replacing failed carries
// (0, 0 for an index's first pod).
func replacementFailureCounts(job *batchv1.Job, failed *corev1.Pod) (counted, ignored int32) {
	if failed == nil {
		return 0, 0
	}
	counted, ignored = indexFailureCount(failed), indexIgnoredFailureCount(failed)
	if job.Spec.PodFailurePolicy != nil && !matchPodFailurePolicy(job.Spec.PodFailurePolicy, failed).count {
		return counted, ignored + 1
	}
	return counted + 1, ignored
}

// podsAwaitingReplacement maps each index with a failed pod, no active pod and no final
// outcome to its last failed pod: with backoffLimitPerIndex that pod keeps its finalizer
// until its replacement exists, as the replacement takes its failure count from it.
func podsAwaitingReplacement(job *batchv1.Job, pods, active []*corev1.Pod, succeeded intervals, failed *intervals, counted func(*corev1.Pod) bool) map[int]*corev1.Pod {
	completions := completionsOf(job)
	activeIdx := indexesOf(active)
	out := map[int]*corev1.Pod{}
	for _, p := range pods {
		if !counted(p) || !podFailed(p, job) {
			continue
		}
		ix := completionIndex(p)
		if !validIndex(ix, completions) || succeeded.has(ix) || (failed != nil && failed.has(ix)) || activeIdx.Has(ix) {
			continue
		}
		last, ok := out[ix]
		if !ok || (absoluteFailureCount(last) <= absoluteFailureCount(p) && !finishedTime(p).Before(finishedTime(last))) {
			out[ix] = p
		}
	}
	return out
}

func absoluteFailureCount(p *corev1.Pod) int32 {
	return indexFailureCount(p) + indexIgnoredFailureCount(p)
}

// duplicateIndexPods splits the active pods of an Indexed Job into those to remove (no
// valid index, or a second pod of an index: the one to keep is the last in deletion
// order) and the rest.
func duplicateIndexPods(pods []*corev1.Pod, completions int32) (rm, keep []*corev1.Pod) {
	byIndex := map[int][]*corev1.Pod{}
	for _, p := range pods {
		ix := completionIndex(p)
		if !validIndex(ix, completions) {
			rm = append(rm, p)
			continue
		}
		byIndex[ix] = append(byIndex[ix], p)
	}
	idx := make([]int, 0, len(byIndex))
	for ix := range byIndex {
		idx = append(idx, ix)
	}
	sort.Ints(idx)
	for _, ix := range idx {
		same := byIndex[ix]
		sortForDeletion(same)
		rm = append(rm, same[:len(same)-1]...)
		keep = append(keep, same[len(same)-1])
	}
	return rm, keep
}
