package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// conflictRetry is when a key whose sync lost a write race is looked at again; each
// further lost race of the same key doubles the wait, up to conflictRetryMax.
const (
	conflictRetry    = 100 * time.Millisecond
	conflictRetryMax = 1000 * time.Second
)

// conflictBackoffs holds, per queue, the per-key backoff of keys whose syncs keep
// losing write races; every worker of a queue shares it.
var conflictBackoffs sync.Map // queue -> workqueue.TypedRateLimiter[K]

// conflictBackoff is q's per-key backoff of lost write races.
func conflictBackoff[K comparable](q workqueue.TypedRateLimitingInterface[K]) workqueue.TypedRateLimiter[K] {
	if l, ok := conflictBackoffs.Load(q); ok {
		return l.(workqueue.TypedRateLimiter[K])
	}
	l, _ := conflictBackoffs.LoadOrStore(q, workqueue.NewTypedItemExponentialFailureRateLimiter[K](conflictRetry, conflictRetryMax))
	return l.(workqueue.TypedRateLimiter[K])
}

// Gone says whether err means that what a key names can no longer be made: its
// namespace is being terminated (the API server refuses new content in it, with the
// NamespaceTerminating cause) or no longer exists (NotFound of the namespace). Retrying
// cannot succeed; the namespace's deletion removes the object, and a namespace created
// again under the name brings the key back through its informers.
func Gone(err error) bool {
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return true
	}
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Group == "" && d.Kind == "namespaces"
}

// SyncFunc reconciles one key; an error puts the key back rate limited, and an error
// made by RequeueAfter has it looked at again after a delay without counting as a
// failure.
type SyncFunc[K comparable] func(ctx context.Context, key K) error

// requeue is the error RequeueAfter makes.
type requeue struct{ after time.Duration }

func (r *requeue) Error() string { return fmt.Sprintf("look again in %v", r.after) }

// RequeueAfter is what a SyncFunc returns when its key is not done yet but nothing
// failed (a namespace whose content is still going, a pod whose volumes are not
// attached yet): the key's rate-limit history is forgotten and the key is synced again
// after d. The failure callback is not called.
func RequeueAfter(d time.Duration) error { return &requeue{after: d} }

// FailFunc reports that sync failed for key and will be retried.
type FailFunc[K comparable] func(ctx context.Context, key K, err error)

// Start starts n workers on q and returns at once. Each worker syncs keys until q
// shuts down, and is started again a second after it returns while ctx lasts.
func Start[K comparable](ctx context.Context, n int, q workqueue.TypedRateLimitingInterface[K], sync SyncFunc[K], failed FailFunc[K]) {
	for i := 0; i < n; i++ {
		go wait.UntilWithContext(ctx, func(ctx context.Context) { Work(ctx, q, sync, failed) }, time.Second)
	}
}

// Work syncs the keys of q until q shuts down.
func Work[K comparable](ctx context.Context, q workqueue.TypedRateLimitingInterface[K], sync SyncFunc[K], failed FailFunc[K]) {
	for processNext(ctx, q, sync, failed) {
	}
	conflictBackoffs.Delete(q)
}

// processNext syncs one key of q; it returns false once q has shut down.
func processNext[K comparable](ctx context.Context, q workqueue.TypedRateLimitingInterface[K], sync SyncFunc[K], failed FailFunc[K]) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	err := sync(ctx, key)
	conflicts := conflictBackoff(q)
	var again *requeue
	switch {
	case err == nil:
		q.Forget(key)
		conflicts.Forget(key)
	case errors.As(err, &again):
		q.Forget(key)
		conflicts.Forget(key)
		q.AddAfter(key, again.after)
	case Gone(err):
		q.Forget(key)
		conflicts.Forget(key)
	case apierrors.IsConflict(err):
		// The cache is behind the API server: the newer object's event re-adds the
		// key. Retry soon as a safety net, outside the rate limiter, whose overall
		// bucket (10/s) would otherwise throttle a busy controller's every write race;
		// a key that keeps losing waits twice as long each time, so it cannot spin.
		failed(ctx, key, err)
		q.Forget(key)
		q.AddAfter(key, conflicts.When(key))
	default:
		failed(ctx, key, err)
		q.AddRateLimited(key)
	}
	return true
}

// Failed returns a FailFunc that logs "<name> sync failed, will retry" through the
// default slog logger with the key under keyAttr: at Info when benign(err) holds, at
// Error otherwise (benign may be nil).
func Failed(name, keyAttr string, benign func(error) bool) FailFunc[string] {
	msg := name + " sync failed, will retry"
	return func(ctx context.Context, key string, err error) {
		level := slog.LevelError
		if benign != nil && benign(err) {
			level = slog.LevelInfo
		}
		slog.Log(ctx, level, msg, keyAttr, key, "err", err)
	}
}

// LogInfo returns a FailFunc that logs msg at Info through log with the key under
// keyAttr, as the CSI sidecars report a failed object they will retry.
func LogInfo(log *slog.Logger, msg, keyAttr string) FailFunc[string] {
	return func(ctx context.Context, key string, err error) {
		log.InfoContext(ctx, msg, keyAttr, key, "err", err)
	}
}

// Enqueue adds the namespace/name key of obj to q; obj may be the tombstone an
// informer hands to a delete handler. An object without a key is ignored.
func Enqueue(q workqueue.TypedInterface[string], obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		q.Add(key)
	}
}
