// Package ttlafterfinished is the TTL-after-finished controller of the controller-manager
// ("ttl-after-finished-controller"): it deletes a finished Job once
// spec.ttlSecondsAfterFinished has passed since it finished, as upstream.
//
// Contract:
//   - A Job is finished when its Complete or Failed condition is True; it finished at
//     that condition's lastTransitionTime. Jobs without a TTL, not finished, or already
//     being deleted are left alone.
//   - Before the TTL has passed the Job is looked at again when it will have; then the
//     controller reads the Job afresh from the API server (the TTL may have changed) and
//     deletes it with propagationPolicy Foreground and its UID as a precondition, so that
//     its pods go first and a new Job of the same name is never deleted.
//   - Time comes from an injected clock; decisions (timeLeft) are pure functions.
//
// It talks to the API server only through client-go (a shared informer on Jobs, jobs
// get and delete).
package ttlafterfinished
