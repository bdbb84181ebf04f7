package driver

import "sync"

// inflight holds the keys (volume ids, volume names, snapshot names) of the
// operations running now, so that a second operation on the same key is refused
// with Aborted instead of racing the first.
type inflight struct {
	mu   sync.Mutex
	keys map[string]struct{}
}

func newInflight() *inflight { return &inflight{keys: map[string]struct{}{}} }

// tryLock takes key; it returns false when an operation already holds it.
func (i *inflight) tryLock(key string) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	if _, busy := i.keys[key]; busy {
		return false
	}
	i.keys[key] = struct{}{}
	return true
}

func (i *inflight) unlock(key string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	delete(i.keys, key)
}
