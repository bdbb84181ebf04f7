package expectations

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
)

// TTL is how long expectations are trusted before the controller acts on its cache
// anyway (a lost watch event must not wedge an object), as upstream.
const TTL = 5 * time.Minute

// Expectations remembers, per controller key, the pod creations not yet seen by the
// informer and the pods whose deletion was asked but not yet seen.
type Expectations struct {
	mu  sync.Mutex
	now func() time.Time
	m   map[string]*expectation
}

type expectation struct {
	adds    int
	deletes sets.Set[string]
	at      time.Time
}

// New returns empty Expectations that read the time from now.
func New(now func() time.Time) *Expectations {
	return &Expectations{now: now, m: map[string]*expectation{}}
}

// Satisfied says whether the controller may act on key: nothing is in flight, or what
// is in flight was recorded more than TTL ago.
func (e *Expectations) Satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.m[key]
	if !ok {
		return true
	}
	if x.adds <= 0 && x.deletes.Len() == 0 {
		return true
	}
	return e.now().Sub(x.at) > TTL
}

// Expect records adds creations and the deletion of the pods in deletes
// (namespace/name) for key.
func (e *Expectations) Expect(key string, adds int, deletes []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[key] = &expectation{adds: adds, deletes: sets.New(deletes...), at: e.now()}
}

// Created lowers the creations expected for key by one.
func (e *Expectations) Created(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[key]; ok && x.adds > 0 {
		x.adds--
	}
}

// Deleted marks the deletion of pod (namespace/name) for key as seen.
func (e *Expectations) Deleted(key, pod string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[key]; ok {
		x.deletes.Delete(pod)
	}
}

// Forget drops what is known of key.
func (e *Expectations) Forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
