package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// conflictRetry is when a key whose sync lost a write race is looked at again.
const conflictRetry = 100 * time.Millisecond

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
}

// processNext syncs one key of q; it returns false once q has shut down.
func processNext[K comparable](ctx context.Context, q workqueue.TypedRateLimitingInterface[K], sync SyncFunc[K], failed FailFunc[K]) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	err := sync(ctx, key)
	var again *requeue
	if errors.As(err, &again) {
		q.Forget(key)
		q.AddAfter(key, again.after)
		return true
	}
	if err != nil {
		failed(ctx, key, err)
		if apierrors.IsConflict(err) {
			// The cache is behind the API server: the newer object's event re-adds the
			// key. Retry soon as a safety net, outside the rate limiter, whose overall
			// bucket (10/s) would otherwise throttle a busy controller's every write race.
			q.Forget(key)
			q.AddAfter(key, conflictRetry)
			return true
		}
		q.AddRateLimited(key)
		return true
	}
	q.Forget(key)
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
