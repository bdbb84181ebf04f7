package job

import (
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/util/podutil"
)

// Messages of the conditions the controller sets, as upstream.
const (
	msgBackoffLimitExceeded     = "Job has reached the specified backoff limit"
	msgDeadlineExceeded         = "Job was active longer than specified deadline"
	msgMaxFailedIndexesExceeded = "Job has exceeded the specified maximal number of failed indexes"
	msgFailedIndexes            = "Job has failed indexes"
	msgCompletionsReached       = "Reached expected number of succeeded pods"
)

// completionsOf is spec.completions (0 when nil: a work queue).
func completionsOf(job *batchv1.Job) int32 { return ptr.Deref(job.Spec.Completions, 0) }

// parallelismOf is spec.parallelism (1 when the API server did not default it).
func parallelismOf(job *batchv1.Job) int32 { return ptr.Deref(job.Spec.Parallelism, 1) }

// backoffLimitOf is spec.backoffLimit as the API server defaults it: 6, or unlimited
// with backoffLimitPerIndex.
func backoffLimitOf(job *batchv1.Job) int32 {
	if job.Spec.BackoffLimit != nil {
		return *job.Spec.BackoffLimit
	}
	if job.Spec.BackoffLimitPerIndex != nil {
		return 1<<31 - 1
	}
	return 6
}

func isIndexed(job *batchv1.Job) bool {
	return job.Spec.CompletionMode != nil && *job.Spec.CompletionMode == batchv1.IndexedCompletion
}

func hasBackoffLimitPerIndex(job *batchv1.Job) bool {
	return isIndexed(job) && job.Spec.BackoffLimitPerIndex != nil
}

func suspended(job *batchv1.Job) bool { return ptr.Deref(job.Spec.Suspend, false) }

// onlyReplaceFailedPods says whether a pod being deleted is replaced only once it has
// failed (podReplacementPolicy Failed, the default with a podFailurePolicy) rather than
// as soon as it terminates.
func onlyReplaceFailedPods(job *batchv1.Job) bool {
	if p := job.Spec.PodReplacementPolicy; p != nil {
		return *p == batchv1.Failed
	}
	return job.Spec.PodFailurePolicy != nil
}

// managedElsewhere says whether spec.managedBy hands the Job to another controller.
func managedElsewhere(job *batchv1.Job) bool {
	return job.Spec.ManagedBy != nil && *job.Spec.ManagedBy != batchv1.JobControllerName
}

// podActive: neither finished nor being deleted.
func podActive(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && p.DeletionTimestamp == nil
}

// podTerminating: being deleted but not finished.
func podTerminating(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// podFailed says whether the Job counts p as failed: phase Failed, or (unless only
// failed pods are replaced) being deleted without having succeeded.
func podFailed(p *corev1.Pod, job *batchv1.Job) bool {
	if p.Status.Phase == corev1.PodFailed {
		return true
	}
	if onlyReplaceFailedPods(job) {
		return false
	}
	return p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded
}

func countReady(pods []*corev1.Pod) int32 {
	var n int32
	for _, p := range pods {
		if podutils.IsPodReady(p) {
			n++
		}
	}
	return n
}

// wantActive is how many pods should run: for a work queue (nil completions)
// parallelism until a pod succeeded, then what runs; otherwise the completions still
// missing, at most parallelism.
func wantActive(job *batchv1.Job, succeeded, active int32) int32 {
	if job.Spec.Completions == nil {
		if succeeded > 0 {
			return active
		}
		return parallelismOf(job)
	}
	return max(0, min(*job.Spec.Completions-succeeded, parallelismOf(job)))
}

// complete says whether a Job that has not failed is done: for a work queue, a pod
// succeeded and none runs; otherwise completions pods succeeded and none runs.
func complete(job *batchv1.Job, succeeded, active int32) bool {
	if active != 0 {
		return false
	}
	if job.Spec.Completions == nil {
		return succeeded > 0
	}
	return succeeded >= *job.Spec.Completions
}

// podsForRemoval picks at least n active pods to delete: for an Indexed Job first those
// without a valid index and the extra pods of an index, then (all Jobs) in deletion
// order: unscheduled, pending, not ready, ready for less time, restarted more, newer.
func podsForRemoval(job *batchv1.Job, active []*corev1.Pod, n int) []*corev1.Pod {
	var rm, left []*corev1.Pod
	if isIndexed(job) {
		rm, left = duplicateIndexPods(active, completionsOf(job))
	} else {
		left = append(left, active...)
	}
	if len(rm) < n {
		sortForDeletion(left)
		rm = append(rm, left[:min(n-len(rm), len(left))]...)
	}
	return rm
}

// sortForDeletion orders pods least valuable first, as upstream's ActivePods.
func sortForDeletion(pods []*corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool { return deleteBefore(pods[i], pods[j]) })
}

func deleteBefore(a, b *corev1.Pod) bool {
	if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	if pa, pb := phaseOrder(a.Status.Phase), phaseOrder(b.Status.Phase); pa != pb {
		return pa < pb
	}
	if ra, rb := podutils.IsPodReady(a), podutils.IsPodReady(b); ra != rb {
		return !ra
	}
	if podutils.IsPodReady(a) && podutils.IsPodReady(b) {
		if ta, tb := podutil.ReadySince(a), podutil.ReadySince(b); !ta.Equal(tb) {
			return afterOrZero(ta, tb)
		}
	}
	if ra, rb := maxRestarts(a), maxRestarts(b); ra != rb {
		return ra > rb
	}
	if ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time; !ta.Equal(tb) {
		return afterOrZero(ta, tb)
	}
	return false
}

// afterOrZero: a zero time first, then the later time.
func afterOrZero(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero()
	}
	return a.After(b)
}

func phaseOrder(p corev1.PodPhase) int {
	switch p {
	case corev1.PodUnknown:
		return 1
	case corev1.PodRunning:
		return 2
	}
	return 0
}

func maxRestarts(p *corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n = max(n, c.RestartCount)
	}
	return n
}

// pastBackoffLimitOnFailure says whether, with restartPolicy OnFailure, the containers of
// the running and pending pods have restarted backoffLimit times in all.
func pastBackoffLimitOnFailure(job *batchv1.Job, pods []*corev1.Pod) bool {
	if job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		return false
	}
	var restarts int32
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning && p.Status.Phase != corev1.PodPending {
			continue
		}
		for _, cs := range p.Status.InitContainerStatuses {
			restarts += cs.RestartCount
		}
		for _, cs := range p.Status.ContainerStatuses {
			restarts += cs.RestartCount
		}
	}
	if limit := backoffLimitOf(job); limit > 0 {
		return restarts >= limit
	}
	return restarts > 0
}

// deadlineLeft is how long the Job may still run under activeDeadlineSeconds (ok false:
// no deadline applies, the Job has no start time or is suspended); <= 0 means past it.
func deadlineLeft(job *batchv1.Job, now time.Time) (time.Duration, bool) {
	if job.Spec.ActiveDeadlineSeconds == nil || job.Status.StartTime == nil || suspended(job) {
		return 0, false
	}
	return time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second - now.Sub(job.Status.StartTime.Time), true
}

// failureInput is what the failure and success decisions of a sync look at.
type failureInput struct {
	job  *batchv1.Job
	pods []*corev1.Pod
	// failed counts the failed pods (counted, uncounted and new) that count towards
	// backoffLimit.
	failed int32
	// succeeded and failed indexes of an Indexed Job (failedIdx nil without
	// backoffLimitPerIndex).
	succeededIdx intervals
	failedIdx    *intervals
	now          time.Time
}

// finishCondition decides whether the Job has met its end in this sync, and how: the
// condition to reach (FailureTarget or SuccessCriteriaMet when newly decided, Failed when
// a FailureTarget was recorded before), or nil. An earlier SuccessCriteriaMet stands.
func finishCondition(in failureInput) *batchv1.JobCondition {
	job := in.job
	if c := findCondition(job.Status.Conditions, batchv1.JobSuccessCriteriaMet); c != nil && c.Status == corev1.ConditionTrue {
		return c
	}
	if c := findCondition(job.Status.Conditions, batchv1.JobFailureTarget); c != nil && c.Status == corev1.ConditionTrue {
		return newCondition(batchv1.JobFailed, c.Reason, c.Message, in.now)
	}
	if msg := failJobMessage(job, in.pods); msg != nil {
		return newCondition(batchv1.JobFailureTarget, batchv1.JobReasonPodFailurePolicy, *msg, in.now)
	}
	if in.failed > backoffLimitOf(job) || pastBackoffLimitOnFailure(job, in.pods) {
		return newCondition(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded, msgBackoffLimitExceeded, in.now)
	}
	if left, ok := deadlineLeft(job, in.now); ok && left <= 0 {
		return newCondition(batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded, msgDeadlineExceeded, in.now)
	}
	if !isIndexed(job) {
		return nil
	}
	if in.failedIdx != nil {
		nFailed := in.failedIdx.total()
		if job.Spec.MaxFailedIndexes != nil && nFailed > int(*job.Spec.MaxFailedIndexes) {
			return newCondition(batchv1.JobFailureTarget, batchv1.JobReasonMaxFailedIndexesExceeded, msgMaxFailedIndexesExceeded, in.now)
		}
		if nFailed > 0 && nFailed+in.succeededIdx.total() >= int(completionsOf(job)) {
			return newCondition(batchv1.JobFailureTarget, batchv1.JobReasonFailedIndexes, msgFailedIndexes, in.now)
		}
	}
	if msg, ok := matchSuccessPolicy(job.Spec.SuccessPolicy, completionsOf(job), in.succeededIdx); ok {
		return newCondition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonSuccessPolicy, msg, in.now)
	}
	return nil
}

// finalCondition is the terminal condition an interim one leads to: Failed after
// FailureTarget, Complete after SuccessCriteriaMet (same reason and message).
func finalCondition(c *batchv1.JobCondition, now time.Time) *batchv1.JobCondition {
	switch c.Type {
	case batchv1.JobFailureTarget:
		return newCondition(batchv1.JobFailed, c.Reason, c.Message, now)
	case batchv1.JobSuccessCriteriaMet:
		return newCondition(batchv1.JobComplete, c.Reason, c.Message, now)
	}
	return c
}

func newCondition(t batchv1.JobConditionType, reason, message string, now time.Time) *batchv1.JobCondition {
	return &batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message,
		LastProbeTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)}
}

func findCondition(list []batchv1.JobCondition, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range list {
		if list[i].Type == t {
			return &list[i]
		}
	}
	return nil
}

// setCondition sets condition t to status, reason and message (times now when it
// changes); a condition absent and to be False is not added. It says whether list changed.
func setCondition(list []batchv1.JobCondition, t batchv1.JobConditionType, status corev1.ConditionStatus, reason, message string, now time.Time) ([]batchv1.JobCondition, bool) {
	if c := findCondition(list, t); c != nil {
		if c.Status == status && c.Reason == reason && c.Message == message {
			return list, false
		}
		*c = *newCondition(t, reason, message, now)
		c.Status = status
		return list, true
	}
	if status == corev1.ConditionFalse {
		return list, false
	}
	c := newCondition(t, reason, message, now)
	c.Status = status
	return append(list, *c), true
}

// finished says whether the Job has its Complete or Failed condition.
func finished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
