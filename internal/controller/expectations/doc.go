// Package expectations records, per controller key, the pod creations and deletions a
// workload controller has asked for but its informer has not yet seen, as the
// ReplicaSet and DaemonSet controllers of the controller-manager need (a controller that
// compares desired with actual pods and creates or deletes pods to match must not act
// twice on a stale cache).
//
// Contract:
//   - A key with nothing in flight is Satisfied; so is one whose expectations were set
//     more than TTL ago (a lost watch event must not wedge an object).
//   - Expect replaces what is known of a key; Created and Deleted lower it as the
//     informer reports; Forget drops it. All methods are safe for concurrent use.
package expectations
