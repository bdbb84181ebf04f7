package job

import (
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// backoffRecord is what the pod re-creation back-off of a Job depends on: the pod
// failures since its last success and when the last one happened.
type backoffRecord struct {
	failuresAfterLastSuccess int32
	lastFailure              *time.Time
}

// backoffStore keeps the back-off record of each Job, by key. It lives in memory, as
// upstream's: a restarted controller starts every Job's back-off afresh.
type backoffStore struct {
	mu sync.Mutex
	m  map[string]backoffRecord
}

func newBackoffStore() *backoffStore { return &backoffStore{m: map[string]backoffRecord{}} }

func (s *backoffStore) get(key string) backoffRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key]
}

func (s *backoffStore) set(key string, r backoffRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = r
}

func (s *backoffStore) remove(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

// nextBackoffRecord is old after the newly finished pods: a success resets the count to
// the failures after it; failures add up.
func nextBackoffRecord(old backoffRecord, newSucceeded, newFailed []*corev1.Pod) backoffRecord {
	succeeded, failed := byFinishedTime(newSucceeded), byFinishedTime(newFailed)
	switch {
	case len(succeeded) == 0 && len(failed) == 0:
		return old
	case len(succeeded) == 0:
		last := finishedTime(failed[len(failed)-1])
		return backoffRecord{failuresAfterLastSuccess: old.failuresAfterLastSuccess + int32(len(failed)), lastFailure: &last}
	}
	lastSuccess := finishedTime(succeeded[len(succeeded)-1])
	var r backoffRecord
	for i := len(failed) - 1; i >= 0; i-- {
		t := finishedTime(failed[i])
		if !t.After(lastSuccess) {
			break
		}
		if r.lastFailure == nil {
			r.lastFailure = &t
		}
		r.failuresAfterLastSuccess++
	}
	return r
}

func byFinishedTime(pods []*corev1.Pod) []*corev1.Pod {
	out := append([]*corev1.Pod(nil), pods...)
	sort.SliceStable(out, func(i, j int) bool { return finishedTime(out[i]).Before(finishedTime(out[j])) })
	return out
}

// finishedTime is when a pod finished: its containers' last finish, else when it went
// not ready, else its deletion time less the grace period, else its creation.
func finishedTime(p *corev1.Pod) time.Time {
	if t := containersFinished(p); t != nil {
		return *t
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionFalse && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	if p.DeletionTimestamp != nil {
		return p.DeletionTimestamp.Add(-time.Duration(ptr.Deref(p.DeletionGracePeriodSeconds, 0)) * time.Second)
	}
	return p.CreationTimestamp.Time
}

func containersFinished(p *corev1.Pod) *time.Time {
	var last *time.Time
	for _, cs := range p.Status.ContainerStatuses {
		t := cs.State.Terminated
		if t == nil || t.FinishedAt.IsZero() {
			return nil
		}
		if last == nil || last.Before(t.FinishedAt.Time) {
			last = &t.FinishedAt.Time
		}
	}
	return last
}

// backoffDelay is how long after the last of failures failures in a row a pod may be
// created again at now: base doubled per failure after the first, at most max; 0 once
// that has passed.
func backoffDelay(failures int32, lastFailure *time.Time, now time.Time, base, maxDelay time.Duration) time.Duration {
	if failures == 0 || lastFailure == nil {
		return 0
	}
	d := base
	for i := int32(1); i < failures; i++ {
		d *= 2
		if d >= maxDelay {
			d = maxDelay
			break
		}
	}
	d = min(d, maxDelay)
	if elapsed := now.Sub(*lastFailure); elapsed < d {
		return d - elapsed
	}
	return 0
}

// indexBackoffDelay is the back-off of an index whose last failed pod is last (nil: none).
func indexBackoffDelay(last *corev1.Pod, now time.Time, base, maxDelay time.Duration) time.Duration {
	if last == nil {
		return 0
	}
	t := finishedTime(last)
	return backoffDelay(absoluteFailureCount(last)+1, &t, now, base, maxDelay)
}
