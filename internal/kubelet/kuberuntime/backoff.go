package kuberuntime

import (
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// backOff tracks exponential back-offs by key: the first delay is initial, each further
// failure doubles it up to max, and an item that stayed fine for twice max starts over.
type backOff struct {
	clock        clock.PassiveClock
	initial, max time.Duration

	mu      sync.Mutex
	entries map[string]*backOffEntry
}

type backOffEntry struct {
	delay      time.Duration
	lastUpdate time.Time
	// lastErr is the failure that started the current delay (image pulls show it while
	// they back off).
	lastErr string
}

func newBackOff(c clock.PassiveClock, initial, max time.Duration) *backOff {
	return &backOff{clock: c, initial: initial, max: max, entries: map[string]*backOffEntry{}}
}

func (b *backOff) expired(e *backOffEntry, eventTime time.Time) bool {
	return eventTime.Sub(e.lastUpdate) > 2*b.max
}

// inBackOffSince says whether an item that failed at eventTime (a container's finish
// time) must still wait, and the current delay.
func (b *backOff) inBackOffSince(key string, eventTime time.Time) (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || b.expired(e, eventTime) {
		return false, 0
	}
	return b.clock.Since(eventTime) < e.delay, e.delay
}

// inBackOffSinceUpdate says whether the last attempt (the last next) is more recent than
// the current delay, and the failure that started it.
func (b *backOff) inBackOffSinceUpdate(key string) (bool, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok {
		return false, ""
	}
	return b.clock.Since(e.lastUpdate) < e.delay, e.lastErr
}

// next records an attempt after a failure at eventTime: the delay starts at initial, or
// doubles.
func (b *backOff) next(key string, eventTime time.Time, lastErr string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || b.expired(e, eventTime) {
		e = &backOffEntry{delay: b.initial}
		b.entries[key] = e
	} else {
		e.delay = min(2*e.delay, b.max)
	}
	e.lastUpdate, e.lastErr = b.clock.Now(), lastErr
	return e.delay
}

// reset forgets a key (an image that was pulled after all).
func (b *backOff) reset(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.entries, key)
}

// forget drops every key with the prefix (a pod's).
func (b *backOff) forget(prefix string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.entries {
		if strings.HasPrefix(k, prefix) {
			delete(b.entries, k)
		}
	}
}
