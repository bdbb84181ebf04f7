// Package resourcequota is the controller-manager's "resourcequota-controller".
//
// A ResourceQuota caps what a namespace may hold (spec.hard). The admission step of
// the request path (kubectl apply → API server → authentication → authorization →
// admission → etcd) refuses a create that would take status.used past status.hard and
// adds the object's usage to status.used; this controller is the other half: it copies
// spec.hard to status.hard and recomputes status.used from the objects themselves, so
// that usage freed by deletions (and pods reaching a terminal phase) comes back.
//
// Usage is measured by the evaluators of internal/util/quotaeval, which the API
// server's ResourceQuota admission uses too (the two meet on the ResourceQuota's
// status, not in code).
//
// Contract: New(cfg, client, factory) registers informers on the shared factory (the
// caller starts it); Run blocks until ctx ends. A quota is synced when it is created or
// its spec changes, when an object in its namespace is deleted or changes its usage,
// and every Config.Resync; a recount that gave usage back is made again a second
// later, so that an object admitted while it ran is counted once it is in the caches.
// count/<resource>.<group> of kinds beyond the watched ones are resolved through
// discovery and watched from the first quota that names them.
// The status computation (desiredStatus, gaveBack) is pure and tested directly.
package resourcequota
