package job

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"
)

// syncState is what one sync of a Job knows and decides.
type syncState struct {
	key string
	job *batchv1.Job
	// pods are the Job's pods (after adoption and release); active those neither
	// finished nor being deleted.
	pods, active []*corev1.Pod
	// finished is the condition the Job reaches in this sync (nil: it goes on).
	finished *batchv1.JobCondition
	// succeeded and failed count every finished pod, counted or not.
	succeeded, failed int32
	// prevSucceededIdx are the indexes of status.completedIndexes; succeededIdx with
	// those of succeeded pods not counted yet; failedIdx the failed indexes (with
	// backoffLimitPerIndex only).
	prevSucceededIdx, succeededIdx intervals
	failedIdx                      *intervals
	backoff                        backoffRecord
	// removing are the pods whose finalizer removal the informer has not shown yet.
	removing  sets.Set[types.UID]
	uncounted uncountedSets
	// awaiting maps an index to the failed pod its replacement takes its failure count
	// from (backoffLimitPerIndex).
	awaiting           map[int]*corev1.Pod
	terminating, ready int32
}

// tracked says whether p still has to be counted by this controller.
func (s *syncState) tracked(p *corev1.Pod) bool {
	return hasTrackingFinalizer(p) && !s.removing.Has(p.UID)
}

// newlyFinished are the tracked pods that succeeded and failed and are not in
// status.uncountedTerminatedPods yet (for an Indexed Job, only pods of a valid index).
func (s *syncState) newlyFinished() (succeeded, failed []*corev1.Pod) {
	completions := completionsOf(s.job)
	for _, p := range s.pods {
		if !s.tracked(p) || (isIndexed(s.job) && !validIndex(completionIndex(p), completions)) {
			continue
		}
		switch {
		case p.Status.Phase == corev1.PodSucceeded && !s.uncounted.succeeded.Has(p.UID):
			succeeded = append(succeeded, p)
		case podFailed(p, s.job) && !s.uncounted.failed.Has(p.UID):
			failed = append(failed, p)
		}
	}
	return succeeded, failed
}

// countedFailures is how many of the failed pods count towards backoffLimit.
func countedFailures(job *batchv1.Job, failed []*corev1.Pod) int32 {
	n := int32(len(failed))
	if job.Spec.PodFailurePolicy != nil {
		for _, p := range failed {
			if !matchPodFailurePolicy(job.Spec.PodFailurePolicy, p).count {
				n--
			}
		}
	}
	return n
}

// sync brings the pods of Job key to its spec, counts the finished ones and writes its
// status.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil || ns == "" || name == "" {
		return nil
	}
	shared, err := c.jobLister.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.expectations.Forget(key)
		c.finalizers.forget(key)
		c.backoff.remove(key)
		return nil
	}
	if err != nil {
		return err
	}
	if managedElsewhere(shared) {
		return nil
	}
	if finished(shared) {
		c.backoff.remove(key)
		return nil
	}
	if m := shared.Spec.CompletionMode; m != nil && *m != batchv1.NonIndexedCompletion && *m != batchv1.IndexedCompletion {
		c.recorder.Event(shared, corev1.EventTypeWarning, "UnknownCompletionMode", "Skipped Job sync because completion mode is unknown")
		return nil
	}
	if isIndexed(shared) && shared.Spec.Completions == nil {
		return nil // refused by the API server
	}
	job := shared.DeepCopy()
	if job.Status.UncountedTerminatedPods == nil {
		job.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}
	now := c.cfg.Clock.Now()
	// Read the expectations before the pods: a pod that arrives in between defers the
	// sync rather than being missed.
	satisfied := c.expectations.Satisfied(key)
	pods, err := c.podsForJob(ctx, job)
	if err != nil {
		return err
	}
	s := &syncState{key: key, job: job, pods: pods, removing: c.finalizers.pending(key),
		uncounted: newUncountedSets(job.Status.UncountedTerminatedPods)}
	for _, p := range pods {
		if podActive(p) {
			s.active = append(s.active, p)
		}
		if podTerminating(p) {
			s.terminating++
		}
	}
	s.ready = countReady(s.active)
	newSucceeded, newFailed := s.newlyFinished()
	s.succeeded = job.Status.Succeeded + int32(len(newSucceeded)) + int32(s.uncounted.succeeded.Len())
	s.failed = job.Status.Failed + countedFailures(job, newFailed) + int32(s.uncounted.failed.Len())
	startChanged := false
	if job.Status.StartTime == nil && !suspended(job) {
		job.Status.StartTime = &metav1.Time{Time: now}
		startChanged = true
	}
	s.backoff = nextBackoffRecord(c.backoff.get(key), newSucceeded, newFailed)
	if isIndexed(job) {
		s.prevSucceededIdx, s.succeededIdx = succeededIndexes(job, pods)
		s.succeeded = int32(s.succeededIdx.total())
		if hasBackoffLimitPerIndex(job) {
			f := failedIndexes(job, pods)
			s.failedIdx = &f
			s.awaiting = podsAwaitingReplacement(job, pods, s.active, s.succeededIdx, s.failedIdx, s.tracked)
		}
	}
	s.finished = finishCondition(failureInput{job: job, pods: pods, failed: s.failed,
		succeededIdx: s.succeededIdx, failedIdx: s.failedIdx, now: now})
	if s.finished == nil {
		if left, ok := deadlineLeft(job, now); ok {
			c.queue.AddAfter(key, left) // look again when the deadline passes
		}
	}

	var manageErr error
	active := int32(len(s.active))
	suspendChanged := false
	if s.finished != nil {
		ready, deleted, err := c.deleteActivePods(ctx, job, s.active)
		if deleted != active || !satisfied {
			// Pods may remain, or not be in the cache yet: not finished yet.
			s.finished = nil
		}
		active -= deleted
		s.terminating += deleted
		s.ready -= ready
		manageErr = err
	} else {
		managed := false
		if satisfied && job.DeletionTimestamp == nil {
			active, manageErr = c.manage(ctx, s, now)
			managed = true
		}
		switch {
		case complete(job, s.succeeded, active):
			s.finished = newCondition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, msgCompletionsReached, now)
		case managed && suspended(job):
			var changed bool
			job.Status.Conditions, changed = setCondition(job.Status.Conditions, batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended", now)
			if changed {
				suspendChanged = true
				c.recorder.Event(job, corev1.EventTypeNormal, "Suspended", "Job suspended")
			}
		case managed:
			var changed bool
			job.Status.Conditions, changed = setCondition(job.Status.Conditions, batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed", now)
			if changed {
				suspendChanged = true
				c.recorder.Event(job, corev1.EventTypeNormal, "Resumed", "Job resumed")
				// activeDeadlineSeconds counts from the resume, as from a start.
				job.Status.StartTime = &metav1.Time{Time: now}
			}
		}
	}
	needsUpdate := startChanged || suspendChanged || active != job.Status.Active ||
		!ptr.Equal(job.Status.Ready, &s.ready) || !ptr.Equal(job.Status.Terminating, &s.terminating)
	job.Status.Active = active
	job.Status.Ready = ptr.To(s.ready)
	job.Status.Terminating = ptr.To(s.terminating)
	if err := c.trackStatus(ctx, s, needsUpdate, now); err != nil {
		return fmt.Errorf("job %s: tracking status: %w", key, err)
	}
	return manageErr
}

// podsForJob returns the Job's pods: those it controls that match its selector, and the
// orphans it adopts; it releases the pods it controls that no longer match.
func (c *Controller) podsForJob(ctx context.Context, job *batchv1.Job) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("job %s/%s: selector: %w", job.Namespace, job.Name, err)
	}
	all, err := c.podLister.Pods(job.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var owned []*corev1.Pod
	var errs []error
	var canAdopt *bool
	for _, pod := range all {
		ref := metav1.GetControllerOf(pod)
		matches := sel.Matches(labels.Set(pod.Labels))
		switch {
		case ref != nil && ref.UID == job.UID:
			if matches {
				owned = append(owned, pod)
				continue
			}
			if job.DeletionTimestamp != nil {
				continue
			}
			_, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, releasePatch(job, pod), metav1.PatchOptions{})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsInvalid(err) {
				errs = append(errs, fmt.Errorf("release pod %s/%s: %w", pod.Namespace, pod.Name, err))
			}
		case ref == nil && matches && job.DeletionTimestamp == nil && pod.DeletionTimestamp == nil:
			if canAdopt == nil {
				// The cache may be stale: adopt only for a Job that is still there.
				fresh, err := c.client.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
				canAdopt = ptr.To(err == nil && fresh.UID == job.UID && fresh.DeletionTimestamp == nil)
			}
			if !*canAdopt {
				continue
			}
			out, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, adoptPatch(job, pod), metav1.PatchOptions{})
			switch {
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsInvalid(err):
			case err != nil:
				errs = append(errs, fmt.Errorf("adopt pod %s/%s: %w", pod.Namespace, pod.Name, err))
			default:
				owned = append(owned, out)
			}
		}
	}
	return owned, errors.Join(errs...)
}

// manage creates or deletes pods so that the Job runs as many as it should; it returns
// how many are active after it.
func (c *Controller) manage(ctx context.Context, s *syncState, now time.Time) (int32, error) {
	job := s.job
	active := int32(len(s.active))
	if suspended(job) {
		ready, removed, err := c.deleteJobPods(ctx, job, s.key, podsForRemoval(job, s.active, len(s.active)))
		s.terminating += removed
		s.ready -= ready
		return active - removed, err
	}
	want := wantActive(job, s.succeeded, active)
	rm := podsForRemoval(job, s.active, int(max(active-want, 0)))
	if len(rm) > 0 {
		// Deletions first: creations wait for the next sync.
		rm = rm[:min(len(rm), c.cfg.MaxPodsPerSync)]
		ready, removed, err := c.deleteJobPods(ctx, job, s.key, rm)
		s.terminating += removed
		s.ready -= ready
		return active - removed, err
	}
	var terminating []*corev1.Pod
	if onlyReplaceFailedPods(job) {
		for _, p := range s.pods {
			if podTerminating(p) {
				terminating = append(terminating, p)
			}
		}
	}
	diff := want - int32(len(terminating)) - active
	if diff <= 0 {
		return active, nil
	}
	if !hasBackoffLimitPerIndex(job) {
		if wait := backoffDelay(s.backoff.failuresAfterLastSuccess, s.backoff.lastFailure, now, c.cfg.PodFailureBackOff, c.cfg.MaxPodFailureBackOff); wait > 0 {
			c.queue.AddAfter(s.key, max(wait, c.batchPeriod()))
			return active, nil
		}
	}
	diff = min(diff, int32(c.cfg.MaxPodsPerSync))
	indexes := make([]int, diff)
	for i := range indexes {
		indexes[i] = noIndex
	}
	if isIndexed(job) {
		indexes = firstPendingIndexes(int(diff), int(completionsOf(job)), s.active, terminating, s.succeededIdx, s.failedIdx)
		if hasBackoffLimitPerIndex(job) {
			var wait time.Duration
			if indexes, wait = indexesDue(indexes, s.awaiting, now, c.cfg.PodFailureBackOff, c.cfg.MaxPodFailureBackOff); wait > 0 {
				c.queue.AddAfter(s.key, max(wait, c.batchPeriod()))
				return active, nil
			}
		}
	}
	created, err := c.createPods(ctx, job, s.key, indexes, s.awaiting)
	return active + created, err
}

// indexesDue keeps the indexes whose back-off has passed; when none has, it returns how
// long until the first one's does.
func indexesDue(indexes []int, awaiting map[int]*corev1.Pod, now time.Time, base, maxDelay time.Duration) ([]int, time.Duration) {
	var due []int
	var soonest time.Duration
	for _, ix := range indexes {
		wait := indexBackoffDelay(awaiting[ix], now, base, maxDelay)
		switch {
		case wait == 0:
			due = append(due, ix)
		case soonest == 0 || wait < soonest:
			soonest = wait
		}
	}
	if len(due) > 0 {
		return due, 0
	}
	return nil, soonest
}

// createPods creates a pod per entry of indexes (noIndex for NonIndexed Jobs) in batches
// of 1, 2, 4…, stopping at the first batch with a failure; it returns how many it
// created.
func (c *Controller) createPods(ctx context.Context, job *batchv1.Job, key string, indexes []int, awaiting map[int]*corev1.Pod) (int32, error) {
	n := len(indexes)
	if n == 0 {
		return 0, nil
	}
	c.expectations.Expect(key, n, nil)
	var created int32
	var mu sync.Mutex
	var errs []error
	done := 0
	for size := 1; done < n; size *= 2 {
		batch := indexes[done:min(done+size, n)]
		var wg sync.WaitGroup
		failed := false
		for _, ix := range batch {
			wg.Add(1)
			go func(ix int) {
				defer wg.Done()
				err := c.createPod(ctx, job, podForJob(job, ix, awaiting[ix]))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					created++
				case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
					c.expectations.Created(key) // the namespace goes: nothing to wait for
				default:
					c.expectations.Created(key) // will not be seen
					errs = append(errs, err)
					failed = true
				}
			}(ix)
		}
		wg.Wait()
		done += len(batch)
		if failed {
			for i := done; i < n; i++ {
				c.expectations.Created(key) // skipped in this sync
			}
			break
		}
	}
	return created, errors.Join(errs...)
}

func (c *Controller) createPod(ctx context.Context, job *batchv1.Job, pod *corev1.Pod) error {
	out, err := c.client.CoreV1().Pods(job.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			c.recorder.Eventf(job, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
		}
		return fmt.Errorf("create pod for job %s/%s: %w", job.Namespace, job.Name, err)
	}
	c.recorder.Eventf(job, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %s", out.Name)
	return nil
}

// deletePod deletes a pod of job, recording the outcome as an Event.
func (c *Controller) deletePod(ctx context.Context, job *batchv1.Job, pod *corev1.Pod) error {
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
	switch {
	case err == nil:
		c.recorder.Eventf(job, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", pod.Name)
	case !apierrors.IsNotFound(err):
		c.recorder.Eventf(job, corev1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
		return fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return err
}

func (c *Controller) patchPod(ctx context.Context, pod *corev1.Pod, patch []byte) error {
	_, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	return err
}

// deleteActivePods deletes the active pods of a finishing Job, keeping their finalizers
// (they are counted as failed, then released); it returns how many ready pods and how
// many pods in all it deleted.
func (c *Controller) deleteActivePods(ctx context.Context, job *batchv1.Job, pods []*corev1.Pod) (int32, int32, error) {
	return c.deleteEach(pods, func(p *corev1.Pod) error {
		if err := c.deletePod(ctx, job, p); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
}

// deleteJobPods deletes pods the Job no longer wants (excess, suspended), removing their
// finalizer first so that they are not counted as failures.
func (c *Controller) deleteJobPods(ctx context.Context, job *batchv1.Job, key string, pods []*corev1.Pod) (int32, int32, error) {
	if len(pods) == 0 {
		return 0, 0, nil
	}
	keys := make([]string, len(pods))
	for i, p := range pods {
		keys[i] = p.Namespace + "/" + p.Name
	}
	c.expectations.Expect(key, 0, keys)
	return c.deleteEach(pods, func(p *corev1.Pod) error {
		podKey := p.Namespace + "/" + p.Name
		if patch := removeFinalizerPatch(p); patch != nil {
			if err := c.patchPod(ctx, p, patch); err != nil {
				c.expectations.Deleted(key, podKey)
				if apierrors.IsNotFound(err) {
					return nil
				}
				return fmt.Errorf("removing the tracking finalizer of pod %s: %w", podKey, err)
			}
		}
		if err := c.deletePod(ctx, job, p); err != nil {
			c.expectations.Deleted(key, podKey)
			if !apierrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	})
}

// deleteEach runs del on every pod at once; it returns how many ready pods and how many
// pods it deleted, and the errors.
func (c *Controller) deleteEach(pods []*corev1.Pod, del func(*corev1.Pod) error) (int32, int32, error) {
	var mu sync.Mutex
	var ready, deleted int32
	var errs []error
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Add(1)
		go func(p *corev1.Pod) {
			defer wg.Done()
			err := del(p)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			deleted++
			if podutils.IsPodReady(p) {
				ready++
			}
		}(p)
	}
	wg.Wait()
	return ready, deleted, errors.Join(errs...)
}

// trackStatus counts finished pods: it adds them to status.uncountedTerminatedPods (or
// completedIndexes) and records the interim conditions, removes their finalizers, moves
// them into succeeded and failed, and sets Complete or Failed once nothing is left to
// count or to terminate. Counting is capped per sync so that status stays small.
func (c *Controller) trackStatus(ctx context.Context, s *syncState, needsFlush bool, now time.Time) error {
	job := s.job
	indexed := isIndexed(job)
	completions := completionsOf(job)
	if indexed {
		sort.SliceStable(s.pods, func(i, j int) bool { return completionIndex(s.pods[i]) < completionIndex(s.pods[j]) })
	}
	withFinalizer := sets.New[types.UID]()
	for _, p := range s.pods {
		if s.tracked(p) {
			withFinalizer.Insert(p.UID)
		}
	}
	if moveCounted(&job.Status, withFinalizer) {
		needsFlush = true
	}
	u := job.Status.UncountedTerminatedPods
	var toRemove []*corev1.Pod
	var newSucceededIdx []int
	capped := false
	for _, p := range s.pods {
		if !s.tracked(p) {
			continue // counted in an earlier sync
		}
		failed := podFailed(p, job)
		if !c.canRemoveFinalizer(s, p, failed) {
			continue
		}
		toRemove = append(toRemove, p)
		switch {
		case p.Status.Phase == corev1.PodSucceeded && !s.uncounted.failed.Has(p.UID):
			if indexed {
				// The index is enough to count it once: no UID to keep.
				if ix := completionIndex(p); validIndex(ix, completions) && !s.prevSucceededIdx.has(ix) {
					newSucceededIdx = append(newSucceededIdx, ix)
					needsFlush = true
				}
			} else if !s.uncounted.succeeded.Has(p.UID) {
				u.Succeeded = append(u.Succeeded, p.UID)
				needsFlush = true
			}
		case failed || (s.finished != nil && s.finished.Type != batchv1.JobSuccessCriteriaMet):
			// A failing Job counts every pod not finished as failed.
			if ix := completionIndex(p); !s.uncounted.failed.Has(p.UID) && (!indexed || validIndex(ix, completions)) &&
				matchPodFailurePolicy(job.Spec.PodFailurePolicy, p).count {
				u.Failed = append(u.Failed, p.UID)
				needsFlush = true
			}
		}
		if len(newSucceededIdx)+len(u.Succeeded)+len(u.Failed) >= c.cfg.MaxPodsPerSync {
			capped = true // the status and pod updates bring the Job back
			break
		}
	}
	if indexed {
		sort.Ints(newSucceededIdx)
		s.succeededIdx = s.succeededIdx.withIndexes(newSucceededIdx)
		if str := s.succeededIdx.String(); str != job.Status.CompletedIndexes {
			job.Status.CompletedIndexes = str
			needsFlush = true
		}
		job.Status.Succeeded = int32(s.succeededIdx.total())
		var failedStr *string
		if s.failedIdx != nil {
			failedStr = ptr.To(s.failedIdx.String())
		}
		if !ptr.Equal(job.Status.FailedIndexes, failedStr) {
			job.Status.FailedIndexes = failedStr
			needsFlush = true
		}
	}
	if s.finished != nil && s.finished.Type == batchv1.JobFailureTarget {
		// Record why the Job fails before the pods that show it go.
		job.Status.Conditions = append(job.Status.Conditions, *s.finished)
		needsFlush = true
		s.finished = finalCondition(s.finished, now)
	}
	if s.finished != nil && s.finished.Type == batchv1.JobSuccessCriteriaMet {
		if c := findCondition(job.Status.Conditions, batchv1.JobSuccessCriteriaMet); c == nil || c.Status != corev1.ConditionTrue {
			job.Status.Conditions = append(job.Status.Conditions, *s.finished)
			needsFlush = true
		}
		s.finished = finalCondition(s.finished, now)
	}
	needsFlush, err := c.flushAndRemoveFinalizers(ctx, s, toRemove, withFinalizer, needsFlush)
	if err != nil {
		return err
	}
	done := !capped && c.enactFinished(s, now)
	if !needsFlush && !done {
		return nil
	}
	if _, err := c.updateStatus(ctx, s.job); err != nil {
		return fmt.Errorf("removing uncounted pods from status: %w", err)
	}
	if done {
		c.cfg.Logger.InfoContext(ctx, "job finished", "job", s.key, "condition", s.finished.Type, "reason", s.finished.Reason)
		c.recordFinished(s.job, s.finished)
	}
	return nil
}

// canRemoveFinalizer says whether the pod is done with for counting: the Job is being
// deleted or finishes, the pod succeeded, or it failed (unless, with
// backoffLimitPerIndex, its replacement still has to take its failure count).
func (c *Controller) canRemoveFinalizer(s *syncState, p *corev1.Pod, failed bool) bool {
	if s.job.DeletionTimestamp != nil || s.finished != nil || p.Status.Phase == corev1.PodSucceeded {
		return true
	}
	if !failed {
		return false
	}
	if hasBackoffLimitPerIndex(s.job) {
		if w, ok := s.awaiting[completionIndex(p)]; ok && w.UID == p.UID {
			return false
		}
	}
	return true
}

// flushAndRemoveFinalizers writes the status when it changed (the new uncounted pods and
// interim conditions) before removing the finalizers of toRemove, then moves the pods
// whose finalizer is gone into the counters; if some removals failed it writes that
// progress. It says whether the status still has changes to write.
func (c *Controller) flushAndRemoveFinalizers(ctx context.Context, s *syncState, toRemove []*corev1.Pod, withFinalizer sets.Set[types.UID], needsFlush bool) (bool, error) {
	if needsFlush {
		job, err := c.updateStatus(ctx, s.job)
		if err != nil {
			return needsFlush, fmt.Errorf("adding uncounted pods to status: %w", err)
		}
		s.job = job
		c.backoff.set(s.key, s.backoff)
		needsFlush = false
	}
	var rmErr error
	if len(toRemove) > 0 {
		var removed []bool
		removed, rmErr = c.removeFinalizers(ctx, s.key, toRemove)
		for i, p := range toRemove {
			if removed[i] {
				withFinalizer.Delete(p.UID)
			}
		}
	}
	if moveCounted(&s.job.Status, withFinalizer) {
		needsFlush = true
	}
	if rmErr != nil && needsFlush {
		if _, err := c.updateStatus(ctx, s.job); err != nil {
			return needsFlush, fmt.Errorf("removing uncounted pods from status: %w", err)
		}
	}
	return needsFlush, rmErr
}

// removeFinalizers removes the tracking finalizer from pods at once; removed[i] says
// whether pods[i] no longer has it (a pod gone counts).
func (c *Controller) removeFinalizers(ctx context.Context, key string, pods []*corev1.Pod) ([]bool, error) {
	uids := make([]types.UID, len(pods))
	for i, p := range pods {
		uids[i] = p.UID
	}
	c.finalizers.expect(key, uids)
	removed := make([]bool, len(pods))
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for i, p := range pods {
		patch := removeFinalizerPatch(p)
		if patch == nil {
			continue
		}
		wg.Add(1)
		go func(i int, p *corev1.Pod) {
			defer wg.Done()
			err := c.patchPod(ctx, p, patch)
			if err != nil {
				c.finalizers.observed(key, p.UID) // no update to wait for
				if !apierrors.IsNotFound(err) {
					mu.Lock()
					errs = append(errs, fmt.Errorf("removing the tracking finalizer of pod %s/%s: %w", p.Namespace, p.Name, err))
					mu.Unlock()
					return
				}
			}
			removed[i] = true
		}(i, p)
	}
	wg.Wait()
	return removed, errors.Join(errs...)
}

// enactFinished sets the Complete or Failed condition the sync reached, once no pod is
// left to count or terminating; it says whether it did.
func (c *Controller) enactFinished(s *syncState, now time.Time) bool {
	if s.finished == nil {
		return false
	}
	job := s.job
	if u := job.Status.UncountedTerminatedPods; u != nil && len(u.Succeeded)+len(u.Failed) > 0 {
		return false
	}
	if s.terminating > 0 {
		return false
	}
	f := s.finished
	job.Status.Conditions, _ = setCondition(job.Status.Conditions, f.Type, corev1.ConditionTrue, f.Reason, f.Message, now)
	if f.Type == batchv1.JobComplete {
		job.Status.CompletionTime = &f.LastTransitionTime
	}
	return true
}

func (c *Controller) recordFinished(job *batchv1.Job, cond *batchv1.JobCondition) {
	if cond.Type == batchv1.JobComplete {
		if job.Spec.Completions != nil && job.Status.Succeeded > *job.Spec.Completions {
			c.recorder.Event(job, corev1.EventTypeWarning, "TooManySucceededPods", "Too many succeeded pods running after completion count reached")
		}
		c.recorder.Event(job, corev1.EventTypeNormal, "Completed", "Job completed")
		return
	}
	c.recorder.Event(job, corev1.EventTypeWarning, cond.Reason, cond.Message)
}

// updateStatus writes job's status through jobs/status.
func (c *Controller) updateStatus(ctx context.Context, job *batchv1.Job) (*batchv1.Job, error) {
	out, err := c.client.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{})
	if err != nil {
		return job, fmt.Errorf("update status of job %s/%s: %w", job.Namespace, job.Name, err)
	}
	if out.Status.UncountedTerminatedPods == nil {
		out.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}
	return out, nil
}
