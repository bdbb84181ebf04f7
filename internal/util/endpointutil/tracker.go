package endpointutil

import (
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/kubelab/kubelab/internal/resourceversion"
)

// deletedSlice marks a slice the controller deleted.
const deletedSlice = ""

// SliceTracker remembers, per Service, the slices a controller wrote (with the
// resourceVersion the API server returned) or deleted, until its informer has caught up.
// A sync from a cache older than its own writes would update slices from stale copies
// (and be refused with a conflict) or create a slice again that it created a moment ago.
type SliceTracker struct {
	mu      sync.Mutex
	written map[string]map[string]string // service key → slice name → resourceVersion, or deletedSlice
}

// NewSliceTracker is a tracker that remembers no write yet.
func NewSliceTracker() *SliceTracker {
	return &SliceTracker{written: map[string]map[string]string{}}
}

// Wrote records that the controller created or updated slice (as returned by the API
// server) for the Service svcKey, or deleted it when deleted is true.
func (t *SliceTracker) Wrote(svcKey string, slice *discoveryv1.EndpointSlice, deleted bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.written[svcKey] == nil {
		t.written[svcKey] = map[string]string{}
	}
	rv := slice.ResourceVersion
	if deleted {
		rv = deletedSlice
	}
	t.written[svcKey][slice.Name] = rv
}

// Stale reports whether cached, the informer's slices of svcKey, predates any write the
// controller made to them; writes the cache has caught up with are forgotten.
func (t *SliceTracker) Stale(svcKey string, cached []*discoveryv1.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.written[svcKey]
	if len(w) == 0 {
		return false
	}
	byName := make(map[string]*discoveryv1.EndpointSlice, len(cached))
	for _, s := range cached {
		byName[s.Name] = s
	}
	stale := false
	for name, rv := range w {
		s, inCache := byName[name]
		switch {
		case rv == deletedSlice && inCache:
			stale = true
		case rv != deletedSlice && (!inCache || resourceversion.Older(s.ResourceVersion, rv)):
			stale = true
		default:
			delete(w, name)
		}
	}
	if len(w) == 0 {
		delete(t.written, svcKey)
	}
	return stale
}

// Gone forgets a slice the informer saw deleted (by the controller or anyone else):
// the cache can no longer be behind on it.
func (t *SliceTracker) Gone(svcKey, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if w := t.written[svcKey]; w != nil {
		delete(w, name)
		if len(w) == 0 {
			delete(t.written, svcKey)
		}
	}
}

// Forget drops what is known of svcKey's slices (the Service is gone).
func (t *SliceTracker) Forget(svcKey string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.written, svcKey)
}
