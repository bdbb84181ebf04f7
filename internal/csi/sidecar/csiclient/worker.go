package csiclient

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"k8s.io/client-go/util/workqueue"
)

// DiscoverDriver is Discover for a sidecar configured with want ("" takes whatever the
// driver reports): it fails, naming component, when the driver cannot be reached or
// reports another name.
func DiscoverDriver(ctx context.Context, conn *grpc.ClientConn, component, want string) (Info, error) {
	info, err := Discover(ctx, conn, 0)
	if err != nil {
		return Info{}, fmt.Errorf("%s: %w", component, err)
	}
	if want != "" && info.Name != want {
		return Info{}, fmt.Errorf("%s: driver reports name %q, configured for %q", component, info.Name, want)
	}
	return info, nil
}

// Work takes keys off q and syncs them until q shuts down. A key whose sync fails is
// logged (msg, with the key under keyName) and put back rate-limited; one that succeeds
// is forgotten, which resets its backoff.
func Work(ctx context.Context, log *slog.Logger, q workqueue.TypedRateLimitingInterface[string], sync func(context.Context, string) error, msg, keyName string) {
	for {
		key, quit := q.Get()
		if quit {
			return
		}
		if err := sync(ctx, key); err != nil {
			log.InfoContext(ctx, msg, keyName, key, "err", err)
			q.AddRateLimited(key)
		} else {
			q.Forget(key)
		}
		q.Done(key)
	}
}

// NewQueue is a sidecar's work queue called name: a failed key waits from start, doubling
// up to max, before it is tried again.
func NewQueue(name string, start, max time.Duration) workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](start, max),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name})
}
