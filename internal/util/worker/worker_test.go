package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubelab/kubelab/internal/testutil"
)

func newQueue() workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond))
}

// A failing key is reported and retried rate limited until it syncs; then its
// rate-limit history is forgotten.
func TestStartRetriesUntilSynced(t *testing.T) {
	q := newQueue()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); q.ShutDown() })

	var mu sync.Mutex
	calls := map[string]int{}
	var failures []string
	done := make(chan struct{})
	boom := errors.New("boom")
	syncKey := func(_ context.Context, key string) error {
		mu.Lock()
		defer mu.Unlock()
		calls[key]++
		if key == "a" && calls[key] < 3 {
			return boom
		}
		if calls["a"] == 3 && calls["b"] == 1 {
			close(done)
		}
		return nil
	}
	failed := func(_ context.Context, key string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if !errors.Is(err, boom) {
			t.Errorf("failure of %s reported with %v, want %v", key, err, boom)
		}
		failures = append(failures, key)
	}
	Start(ctx, 2, q, syncKey, failed)
	q.Add("a")
	q.Add("b")
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("keys not synced: calls %v", calls)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(failures, ",") != "a,a" {
		t.Errorf("failures reported = %v, want [a a]", failures)
	}
	if n := q.NumRequeues("a"); n != 0 {
		t.Errorf("requeues of a after its sync succeeded = %d, want 0 (forgotten)", n)
	}
}

// Work returns once the queue shuts down, after finishing the key it holds.
func TestWorkReturnsOnShutDown(t *testing.T) {
	q := newQueue()
	q.Add("a")
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		Work(context.Background(), q, func(context.Context, string) error { q.ShutDown(); return nil },
			func(context.Context, string, error) { t.Error("no sync failed") })
	}()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("Work did not return after the queue shut down")
	}
	if q.Len() != 0 {
		t.Errorf("queue length after shutdown = %d, want 0", q.Len())
	}
}

func TestFailedLevels(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old) })

	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("stale"))
	for _, tc := range []struct {
		name      string
		benign    func(error) bool
		err       error
		wantLevel string
	}{
		{"nil benign", nil, conflict, "level=ERROR"},
		{"benign error", apierrors.IsConflict, conflict, "level=INFO"},
		{"other error", apierrors.IsConflict, errors.New("broken"), "level=ERROR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf.Reset()
			Failed("widget", "widget", tc.benign)(context.Background(), "ns/w", tc.err)
			line := buf.String()
			for _, want := range []string{tc.wantLevel, `msg="widget sync failed, will retry"`, "widget=ns/w", "err="} {
				if !strings.Contains(line, want) {
					t.Errorf("log line %q lacks %q", line, want)
				}
			}
		})
	}
}

func TestEnqueue(t *testing.T) {
	q := workqueue.NewTyped[string]()
	t.Cleanup(q.ShutDown)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "live"}}
	gone := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone"}}
	Enqueue(q, pod)
	Enqueue(q, cache.DeletedFinalStateUnknown{Key: "ns/gone", Obj: gone})
	Enqueue(q, "not an object")
	var got []string
	for q.Len() > 0 {
		k, _ := q.Get()
		got = append(got, k)
		q.Done(k)
	}
	if strings.Join(got, ",") != "ns/live,ns/gone" {
		t.Errorf("keys queued = %v, want [ns/live ns/gone]", got)
	}
}

// A key whose sync lost a write race (409 Conflict, also wrapped) is retried without
// counting against the rate limiter: its history stays empty.
func TestConflictRetriedOutsideRateLimiter(t *testing.T) {
	q := newQueue()
	t.Cleanup(q.ShutDown)
	conflict := fmt.Errorf("update: %w", apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("changed")))
	calls := 0
	syncKey := func(_ context.Context, key string) error {
		calls++
		if calls == 1 {
			return conflict
		}
		return nil
	}
	q.Add("a")
	if !processNext(context.Background(), q, syncKey, func(context.Context, string, error) {}) {
		t.Fatal("queue shut down")
	}
	if n := q.NumRequeues("a"); n != 0 {
		t.Errorf("requeues after a conflict = %d, want 0 (not rate limited)", n)
	}
	if !processNext(context.Background(), q, syncKey, func(context.Context, string, error) {}) || calls != 2 {
		t.Errorf("conflicting key not synced again: %d calls", calls)
	}
	if n := conflictBackoff(q).NumRequeues("a"); n != 0 {
		t.Errorf("lost races remembered after the key synced = %d, want 0", n)
	}
}

// A key that keeps losing write races waits twice as long before each retry: it
// cannot spin at the first retry's pace.
func TestConflictRetriesBackOff(t *testing.T) {
	q := newQueue()
	t.Cleanup(q.ShutDown)
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "d", errors.New("changed"))
	var times []time.Time
	syncKey := func(_ context.Context, key string) error {
		times = append(times, time.Now())
		return conflict
	}
	q.Add("a")
	for i := 0; i < 4; i++ {
		if !processNext(context.Background(), q, syncKey, func(context.Context, string, error) {}) {
			t.Fatal("queue shut down")
		}
	}
	if !processNext(context.Background(), q, func(context.Context, string) error { times = append(times, time.Now()); return nil },
		func(context.Context, string, error) {}) {
		t.Fatal("queue shut down")
	}
	for i := 1; i < len(times); i++ {
		want := conflictRetry << (i - 1)
		if gap := times[i].Sub(times[i-1]); gap < want {
			t.Errorf("retry %d came after %v, want at least %v", i, gap, want)
		}
	}
}

// A sync that fails because the key's namespace is being terminated, or is gone, is
// not retried: it runs once, is not reported as a failure to retry, and its key's
// rate-limit history is forgotten.
func TestGoneNamespaceIsNotRetried(t *testing.T) {
	terminating := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "replicasets"}, "web-1",
		errors.New("unable to create new content in namespace gone because it is being terminated"))
	terminating.ErrStatus.Details.Causes = append(terminating.ErrStatus.Details.Causes,
		metav1.StatusCause{Type: corev1.NamespaceTerminatingCause, Message: "namespace gone is being terminated", Field: "metadata.namespace"})
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"terminating", fmt.Errorf("create replicaset web-1: %w", terminating)},
		{"namespace not found", fmt.Errorf("create pod: %w", apierrors.NewNotFound(corev1.Resource("namespaces"), "gone"))},
		{"joined", errors.Join(terminating, terminating)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueue()
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(func() { cancel(); q.ShutDown() })
			var mu sync.Mutex
			calls := 0
			syncKey := func(context.Context, string) error {
				mu.Lock()
				defer mu.Unlock()
				calls++
				return tc.err
			}
			failed := func(_ context.Context, key string, err error) {
				t.Errorf("failure of %s reported as to be retried: %v", key, err)
			}
			q.AddRateLimited("gone/web") // some history the sync forgets
			Start(ctx, 1, q, syncKey, failed)
			callsAre := func(n int) func() bool {
				return func() bool { mu.Lock(); defer mu.Unlock(); return calls == n }
			}
			testutil.Eventually(t, "one sync of gone/web", callsAre(1))
			// The queue's limiter would retry within 10ms, 20ms, 40ms...
			testutil.Consistently(t, 500*time.Millisecond, "a single sync of gone/web", callsAre(1))
			if n := q.NumRequeues("gone/web"); n != 0 {
				t.Errorf("requeues of gone/web = %d, want 0 (forgotten)", n)
			}
		})
	}
}

// Gone holds only for a namespace being terminated or missing, not for other
// NotFound or Forbidden errors, which are retried.
func TestGone(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", errors.New("boom"), false},
		{"namespace not found", apierrors.NewNotFound(corev1.Resource("namespaces"), "x"), true},
		{"pod not found", apierrors.NewNotFound(corev1.Resource("pods"), "x"), false},
		{"forbidden", apierrors.NewForbidden(corev1.Resource("pods"), "x", errors.New("no")), false},
		{"other group's namespaces", apierrors.NewNotFound(schema.GroupResource{Group: "example.com", Resource: "namespaces"}, "x"), false},
	} {
		if got := Gone(tc.err); got != tc.want {
			t.Errorf("%s: Gone(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// A key whose sync asks to be looked at again later is not a failure: the failure
// callback is not called, its rate-limit history is forgotten, and it comes back.
func TestRequeueAfterIsNotAFailure(t *testing.T) {
	q := newQueue()
	t.Cleanup(q.ShutDown)
	q.AddRateLimited("a") // some history the requeue forgets
	calls := 0
	syncKey := func(_ context.Context, key string) error {
		calls++
		if calls == 1 {
			return fmt.Errorf("volumes: %w", RequeueAfter(time.Millisecond))
		}
		return nil
	}
	failed := func(_ context.Context, key string, err error) { t.Errorf("failure reported for %s: %v", key, err) }
	if !processNext(context.Background(), q, syncKey, failed) {
		t.Fatal("queue shut down")
	}
	if n := q.NumRequeues("a"); n != 0 {
		t.Errorf("requeues after RequeueAfter = %d, want 0", n)
	}
	if !processNext(context.Background(), q, syncKey, failed) || calls != 2 {
		t.Errorf("requeued key not synced again: %d calls", calls)
	}
}
