package endpoint

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// triggerTimes remembers, per Service, the change times the previous sync saw, so that
// a sync can name the earliest change that is new to it: the value of the
// endpoints.kubernetes.io/last-change-trigger-time annotation.
type triggerTimes struct {
	mu       sync.Mutex
	services map[string]seenTimes
}

// seenTimes are the change times one sync of a Service saw.
type seenTimes struct {
	service time.Time            // the Service's creation
	pods    map[string]time.Time // pod name → its Ready condition's last transition
}

func newTriggerTimes() *triggerTimes { return &triggerTimes{services: map[string]seenTimes{}} }

// observe records the change times of svc (key) and its pods and returns the
// trigger time of this sync: svc's creation on the first sync of the Service, else the
// earliest of the times that moved since the previous sync, zero when none did.
func (t *triggerTimes) observe(key string, svc *corev1.Service, pods []*corev1.Pod) time.Time {
	now := seenTimes{service: svc.CreationTimestamp.Time, pods: make(map[string]time.Time, len(pods))}
	t.mu.Lock()
	prev, known := t.services[key]
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.services[key] = now
	}()
	var earliest time.Time
	moved := func(at, before time.Time) {
		if at.After(before) && (earliest.IsZero() || at.Before(earliest)) {
			earliest = at
		}
	}
	for _, p := range pods {
		at := readySince(p)
		if at.IsZero() {
			continue
		}
		now.pods[p.Name] = at
		moved(at, prev.pods[p.Name])
	}
	moved(now.service, prev.service)
	if !known {
		return now.service
	}
	return earliest
}

// forget drops what is known of the Service key (it is gone).
func (t *triggerTimes) forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.services, key)
}

// readySince is the last transition of pod's Ready condition, zero without one.
func readySince(pod *corev1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}
