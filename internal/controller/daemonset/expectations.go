package daemonset

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
)

// expectationsTTL is how long expectations are trusted before the controller acts on
// its cache anyway (a lost watch event must not wedge a DaemonSet), as upstream.
const expectationsTTL = 5 * time.Minute

// expectations remembers, per DaemonSet key, the pod creations not yet seen by the
// informer and the pods whose deletion was asked but not yet seen.
type expectations struct {
	mu  sync.Mutex
	now func() time.Time
	m   map[string]*expectation
}

type expectation struct {
	adds    int
	deletes sets.Set[string]
	at      time.Time
}

func newExpectations(now func() time.Time) *expectations {
	return &expectations{now: now, m: map[string]*expectation{}}
}

// satisfied says whether the controller may act on key: nothing is in flight, or what
// is in flight was recorded too long ago.
func (e *expectations) satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.m[key]
	if !ok {
		return true
	}
	if x.adds <= 0 && x.deletes.Len() == 0 {
		return true
	}
	return e.now().Sub(x.at) > expectationsTTL
}

// expect records adds creations and the deletion of the pods in deletes for key.
func (e *expectations) expect(key string, adds int, deletes []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[key] = &expectation{adds: adds, deletes: sets.New(deletes...), at: e.now()}
}

// created lowers the creations expected for key by one.
func (e *expectations) created(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[key]; ok && x.adds > 0 {
		x.adds--
	}
}

// deleted marks the deletion of pod (namespace/name) for key as seen.
func (e *expectations) deleted(key, pod string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[key]; ok {
		x.deletes.Delete(pod)
	}
}

// forget drops what is known of key.
func (e *expectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
