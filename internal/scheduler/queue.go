package scheduler

import (
	"container/heap"
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/utils/clock"
)

// QueuedPod is a pending pod and its scheduling history.
type QueuedPod struct {
	Pod *corev1.Pod
	// Attempts counts scheduling attempts (for the backoff).
	Attempts int
	// Timestamp is when the pod entered the queue (ties in priority go to the oldest).
	Timestamp time.Time
	// UnschedulablePlugins rejected the pod in its last attempt.
	UnschedulablePlugins sets.Set[string]
	backoffUntil         time.Time
	unschedulableSince   time.Time
	index                int
	where                int
	deleted              bool
}

const (
	inActive = iota + 1
	inBackoff
	inUnschedulable
	inFlight
)

// SchedulingQueue holds pods waiting for a node: activeQ (by priority, then age), backoffQ
// (until their backoff ends) and the unschedulable pods (until a cluster event that could
// help them, or MaxUnschedulable passes).
type SchedulingQueue struct {
	mu    sync.Mutex
	cond  *sync.Cond
	clock clock.WithTicker

	initialBackoff, maxBackoff, maxUnschedulable time.Duration

	pods          map[types.UID]*QueuedPod
	active        podHeap
	backoff       podHeap
	unschedulable map[types.UID]*QueuedPod

	// cycle counts Pops; moveCycle is the cycle of the last cluster event that moved pods,
	// so that a pod failing in an older cycle goes to backoff rather than missing it.
	cycle, moveCycle int64
	closed           bool
}

// NewSchedulingQueue makes an empty queue.
func NewSchedulingQueue(clk clock.WithTicker, initialBackoff, maxBackoff, maxUnschedulable time.Duration) *SchedulingQueue {
	q := &SchedulingQueue{clock: clk, initialBackoff: initialBackoff, maxBackoff: maxBackoff, maxUnschedulable: maxUnschedulable,
		pods: map[types.UID]*QueuedPod{}, unschedulable: map[types.UID]*QueuedPod{}}
	q.active.less = func(a, b *QueuedPod) bool {
		pa, pb := corev1helpers.PodPriority(a.Pod), corev1helpers.PodPriority(b.Pod)
		if pa != pb {
			return pa > pb
		}
		return a.Timestamp.Before(b.Timestamp)
	}
	q.backoff.less = func(a, b *QueuedPod) bool { return a.backoffUntil.Before(b.backoffUntil) }
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Add queues a new pending pod (or updates the queued one).
func (q *SchedulingQueue) Add(pod *corev1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if qp, ok := q.pods[pod.UID]; ok {
		qp.Pod = pod
		return
	}
	qp := &QueuedPod{Pod: pod, Timestamp: q.clock.Now()}
	q.pods[pod.UID] = qp
	q.pushActive(qp)
}

// Update takes a new version of a pending pod; a changed spec or labels give an
// unschedulable pod another chance.
func (q *SchedulingQueue) Update(old, pod *corev1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	qp, ok := q.pods[pod.UID]
	if !ok {
		qp = &QueuedPod{Pod: pod, Timestamp: q.clock.Now()}
		q.pods[pod.UID] = qp
		q.pushActive(qp)
		return
	}
	qp.Pod = pod
	if qp.where == inUnschedulable && podSchedulingChanged(old, pod) {
		delete(q.unschedulable, pod.UID)
		q.requeue(qp)
	}
}

// podSchedulingChanged: something the scheduler reads changed (not just status or
// bookkeeping).
func podSchedulingChanged(old, pod *corev1.Pod) bool {
	if old == nil {
		return true
	}
	if !equalStringMaps(old.Labels, pod.Labels) || !equalStringMaps(old.Annotations, pod.Annotations) {
		return true
	}
	return !specEqual(&old.Spec, &pod.Spec)
}

// Delete drops a pod (deleted, or bound by someone else).
func (q *SchedulingQueue) Delete(pod *corev1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	qp, ok := q.pods[pod.UID]
	if !ok {
		return
	}
	switch qp.where {
	case inActive:
		heap.Remove(&q.active, qp.index)
	case inBackoff:
		heap.Remove(&q.backoff, qp.index)
	case inUnschedulable:
		delete(q.unschedulable, pod.UID)
	case inFlight:
		qp.deleted = true
		return
	}
	delete(q.pods, pod.UID)
}

// Pop waits for the next active pod. It returns nil when the queue is closed.
func (q *SchedulingQueue) Pop() (*QueuedPod, int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.active.Len() == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return nil, 0
	}
	qp := heap.Pop(&q.active).(*QueuedPod)
	qp.where = inFlight
	qp.Attempts++
	q.cycle++
	return qp, q.cycle
}

// Done ends an attempt that bound the pod (or dropped it).
func (q *SchedulingQueue) Done(uid types.UID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if qp, ok := q.pods[uid]; ok && qp.where == inFlight {
		delete(q.pods, uid)
	}
}

// Requeue puts back a pod whose attempt in cycle failed. Rejected pods wait for a cluster
// event (or for a move during their attempt: then backoff); errors go to backoff.
func (q *SchedulingQueue) Requeue(qp *QueuedPod, cycle int64, rejectedBy sets.Set[string], isError bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if qp.deleted || qp.where != inFlight {
		delete(q.pods, qp.Pod.UID)
		return
	}
	qp.UnschedulablePlugins = rejectedBy
	if isError || q.moveCycle >= cycle {
		q.pushBackoff(qp)
		return
	}
	qp.where = inUnschedulable
	qp.unschedulableSince = q.clock.Now()
	q.unschedulable[qp.Pod.UID] = qp
}

// MoveForEvent gives the unschedulable pods that one of the plugins could now admit
// another chance. interested nil means every pod.
func (q *SchedulingQueue) MoveForEvent(interested sets.Set[string]) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.moveCycle = q.cycle
	for uid, qp := range q.unschedulable {
		if interested != nil && qp.UnschedulablePlugins.Len() > 0 && !qp.UnschedulablePlugins.HasAny(interested.UnsortedList()...) {
			continue
		}
		delete(q.unschedulable, uid)
		q.requeue(qp)
	}
}

// requeue sends a pod to backoff if its backoff has not ended, else to active.
func (q *SchedulingQueue) requeue(qp *QueuedPod) {
	if q.clock.Now().Before(q.backoffEnd(qp)) {
		q.pushBackoff(qp)
		return
	}
	q.pushActive(qp)
}

func (q *SchedulingQueue) backoffEnd(qp *QueuedPod) time.Time {
	d := q.initialBackoff
	for i := 1; i < qp.Attempts && d < q.maxBackoff; i++ {
		d *= 2
	}
	if d > q.maxBackoff {
		d = q.maxBackoff
	}
	return qp.lastAttempt().Add(d)
}

func (qp *QueuedPod) lastAttempt() time.Time {
	if !qp.unschedulableSince.IsZero() {
		return qp.unschedulableSince
	}
	return qp.Timestamp
}

func (q *SchedulingQueue) pushActive(qp *QueuedPod) {
	qp.where = inActive
	heap.Push(&q.active, qp)
	q.cond.Signal()
}

func (q *SchedulingQueue) pushBackoff(qp *QueuedPod) {
	qp.unschedulableSince = q.clock.Now()
	qp.backoffUntil = q.backoffEnd(qp)
	qp.where = inBackoff
	heap.Push(&q.backoff, qp)
}

// flush moves pods whose backoff ended to active, and pods unschedulable for longer than
// maxUnschedulable to active or backoff.
func (q *SchedulingQueue) flush() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	for q.backoff.Len() > 0 && !q.backoff.items[0].backoffUntil.After(now) {
		qp := heap.Pop(&q.backoff).(*QueuedPod)
		q.pushActive(qp)
	}
	for uid, qp := range q.unschedulable {
		if now.Sub(qp.unschedulableSince) >= q.maxUnschedulable {
			delete(q.unschedulable, uid)
			q.requeue(qp)
		}
	}
}

// Run flushes every second until ctx ends, then closes the queue.
func (q *SchedulingQueue) Run(ctx context.Context) {
	t := q.clock.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			q.Close()
			return
		case <-t.C():
			q.flush()
		}
	}
}

// Close wakes Pop with nil.
func (q *SchedulingQueue) Close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

// Lens reports the sizes of activeQ, backoffQ and the unschedulable set.
func (q *SchedulingQueue) Lens() (active, backoff, unschedulable int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.active.Len(), q.backoff.Len(), len(q.unschedulable)
}

type podHeap struct {
	items []*QueuedPod
	less  func(a, b *QueuedPod) bool
}

func (h *podHeap) Len() int           { return len(h.items) }
func (h *podHeap) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }
func (h *podHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].index, h.items[j].index = i, j
}
func (h *podHeap) Push(x any) {
	qp := x.(*QueuedPod)
	qp.index = len(h.items)
	h.items = append(h.items, qp)
}
func (h *podHeap) Pop() any {
	n := len(h.items)
	qp := h.items[n-1]
	h.items[n-1] = nil
	h.items = h.items[:n-1]
	return qp
}
