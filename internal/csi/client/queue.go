package client

import (
	"time"

	"k8s.io/client-go/util/workqueue"
)

// NewQueue is a sidecar's work queue called name: a failed key waits from start, doubling
// up to max, before it is tried again.
func NewQueue(name string, start, max time.Duration) workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](start, max),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name})
}
