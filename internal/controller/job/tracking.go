package job

import (
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// finalizerExpectations remembers, per Job key, the pods whose tracking finalizer the
// controller removed but the informer has not shown without it yet: such pods are
// counted already and must not be counted again from a stale cache.
type finalizerExpectations struct {
	mu sync.Mutex
	m  map[string]sets.Set[types.UID]
}

func newFinalizerExpectations() *finalizerExpectations {
	return &finalizerExpectations{m: map[string]sets.Set[types.UID]{}}
}

// expect records the removals about to be asked for.
func (e *finalizerExpectations) expect(key string, uids []types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.m[key]
	if !ok {
		s = sets.New[types.UID]()
		e.m[key] = s
	}
	s.Insert(uids...)
}

// observed marks the removal from pod uid as seen (or as not to be waited for).
func (e *finalizerExpectations) observed(key string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s, ok := e.m[key]; ok {
		s.Delete(uid)
	}
}

// pending are the removals of key not seen yet (a copy).
func (e *finalizerExpectations) pending(key string) sets.Set[types.UID] {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.m[key].Clone()
}

func (e *finalizerExpectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}

// uncountedSets are status.uncountedTerminatedPods as sets.
type uncountedSets struct{ succeeded, failed sets.Set[types.UID] }

func newUncountedSets(u *batchv1.UncountedTerminatedPods) uncountedSets {
	return uncountedSets{succeeded: sets.New(u.Succeeded...), failed: sets.New(u.Failed...)}
}

// moveCounted takes the pods of status.uncountedTerminatedPods that no longer carry the
// finalizer (uids in withFinalizer still do) into status.succeeded and status.failed. It
// says whether the status changed.
func moveCounted(status *batchv1.JobStatus, withFinalizer sets.Set[types.UID]) bool {
	u := status.UncountedTerminatedPods
	changed := false
	if keep := keepUIDs(u.Succeeded, withFinalizer); len(keep) != len(u.Succeeded) {
		status.Succeeded += int32(len(u.Succeeded) - len(keep))
		u.Succeeded, changed = keep, true
	}
	if keep := keepUIDs(u.Failed, withFinalizer); len(keep) != len(u.Failed) {
		status.Failed += int32(len(u.Failed) - len(keep))
		u.Failed, changed = keep, true
	}
	return changed
}

func keepUIDs(uids []types.UID, in sets.Set[types.UID]) []types.UID {
	var out []types.UID
	for _, uid := range uids {
		if in.Has(uid) {
			out = append(out, uid)
		}
	}
	return out
}
