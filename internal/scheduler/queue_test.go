package scheduler

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clocktesting "k8s.io/utils/clock/testing"
)

func qpod(name string, prio int32) *corev1.Pod {
	p := makePod(name)
	p.UID = types.UID(name)
	p.Spec.Priority = &prio
	return p
}

func newTestQueue() (*SchedulingQueue, *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	return NewSchedulingQueue(clk, time.Second, 10*time.Second, 5*time.Minute), clk
}

func TestQueueOrdersByPriorityThenAge(t *testing.T) {
	q, clk := newTestQueue()
	q.Add(qpod("old-low", 0))
	clk.Step(time.Second)
	q.Add(qpod("high", 100))
	clk.Step(time.Second)
	q.Add(qpod("new-low", 0))
	for _, want := range []string{"high", "old-low", "new-low"} {
		qp, _ := q.Pop()
		if qp.Pod.Name != want {
			t.Errorf("popped %s, want %s", qp.Pod.Name, want)
		}
	}
}

func TestQueueUnschedulableMovesOnlyForInterestingEvents(t *testing.T) {
	q, clk := newTestQueue()
	q.Add(qpod("p", 0))
	qp, cycle := q.Pop()
	q.Requeue(qp, cycle, sets.New(NodeResourcesFitName), false)
	if a, b, u := q.Lens(); a != 0 || b != 0 || u != 1 {
		t.Fatalf("lens %d/%d/%d, want the pod unschedulable", a, b, u)
	}
	q.MoveForEvent(interestPVC) // a claim changed: not what rejected it
	if _, _, u := q.Lens(); u != 1 {
		t.Fatal("moved on an event its plugin does not care about")
	}
	// A node was added; its backoff (1 s after one attempt) has not ended: backoffQ.
	q.MoveForEvent(interestNodeAdd)
	if a, b, u := q.Lens(); a != 0 || b != 1 || u != 0 {
		t.Fatalf("lens %d/%d/%d, want the pod in backoff", a, b, u)
	}
	clk.Step(time.Second)
	q.flush()
	if a, _, _ := q.Lens(); a != 1 {
		t.Fatal("pod did not leave backoff after 1s")
	}
}

func TestQueueEventDuringAttemptSendsToBackoff(t *testing.T) {
	q, _ := newTestQueue()
	q.Add(qpod("p", 0))
	qp, cycle := q.Pop()
	q.MoveForEvent(interestNodeAdd) // while the pod is being scheduled
	q.Requeue(qp, cycle, sets.New(NodeResourcesFitName), false)
	if _, b, u := q.Lens(); b != 1 || u != 0 {
		t.Fatalf("backoff %d unschedulable %d: the event during the attempt was missed", b, u)
	}
}

func TestQueueBackoffDoublesAndCaps(t *testing.T) {
	q, _ := newTestQueue()
	qp := &QueuedPod{Pod: qpod("p", 0), Timestamp: time.Unix(1000, 0)}
	for attempts, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 5: 10 * time.Second, 9: 10 * time.Second} {
		qp.Attempts = attempts
		if got := q.backoffEnd(qp).Sub(qp.Timestamp); got != want {
			t.Errorf("attempts %d: backoff %v, want %v", attempts, got, want)
		}
	}
}

func TestQueueLongUnschedulableIsRetried(t *testing.T) {
	q, clk := newTestQueue()
	q.Add(qpod("p", 0))
	qp, cycle := q.Pop()
	q.Requeue(qp, cycle, sets.New(TaintTolerationName), false)
	clk.Step(5 * time.Minute)
	q.flush()
	if a, _, u := q.Lens(); a != 1 || u != 0 {
		t.Fatalf("active %d unschedulable %d after 5 min", a, u)
	}
}

func TestQueueUpdateAndDelete(t *testing.T) {
	q, clk := newTestQueue()
	p := qpod("p", 0)
	q.Add(p)
	qp, cycle := q.Pop()
	q.Requeue(qp, cycle, sets.New(TaintTolerationName), false)
	// A status-only update (our own condition) does not move it.
	st := p.DeepCopy()
	st.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse}}
	q.Update(p, st)
	if _, _, u := q.Lens(); u != 1 {
		t.Fatal("status update moved the pod")
	}
	// A new toleration does.
	tol := st.DeepCopy()
	tol.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}
	clk.Step(2 * time.Second)
	q.Update(st, tol)
	if a, _, u := q.Lens(); a != 1 || u != 0 {
		t.Fatalf("spec update: active %d unschedulable %d", a, u)
	}
	// Deleted while in flight: not requeued.
	qp, cycle = q.Pop()
	q.Delete(tol)
	q.Requeue(qp, cycle, nil, true)
	if a, b, u := q.Lens(); a+b+u != 0 {
		t.Fatalf("deleted pod requeued: %d/%d/%d", a, b, u)
	}
}
