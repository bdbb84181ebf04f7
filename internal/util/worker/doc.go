// Package worker is the one work-queue loop of kubelab: the controllers of the
// controller-manager, the CSI sidecars, the namespace controller and the kubelet all
// drain their client-go queues through it (each watches through informers, queues keys
// and reconciles them one at a time per worker). It imports no component, so every
// component may use it.
//
// Contract:
//   - Start runs n goroutines that take keys from a client-go rate-limiting queue until
//     it shuts down; each key is synced once at a time (the queue never hands the same
//     key to two workers).
//   - A key whose sync fails is reported to the failure callback and put back rate
//     limited (the queue's limiter; controllers use client-go's default controller
//     limiter, per key 5ms doubling to 1000s, overall 10/s with bursts of 100); a key
//     whose sync succeeds has its rate-limit history forgotten. A key whose sync lost
//     a write race (a Conflict) is retried soon, outside the rate limiter, after
//     100ms doubling for each further lost race of the key. A key whose sync failed
//     because its namespace is being terminated or is gone (Gone) is forgotten and
//     not retried: nothing can be made in it, and its deletion removes the object. A
//     key whose sync returns RequeueAfter(d) is not a failure: it is forgotten and
//     synced again after d.
//   - Failed builds the usual failure report: "<name> sync failed, will retry" with the
//     key under the given attribute, at Info for errors the caller calls benign (a stale
//     cache the retry reads anew) and at Error otherwise; LogInfo logs a given message
//     at Info through a given logger, as the CSI sidecars do.
//
// Enqueue adds the key of an object, or of the object a delete tombstone holds, to a
// queue.
//
// The caller owns the queue: it shuts it down when its Run returns.
package worker
