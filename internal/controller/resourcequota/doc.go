// Package resourcequota is the controller-manager's "resourcequota-controller" and the
// quota evaluators the API server's ResourceQuota admission shares with it.
//
// A ResourceQuota caps what a namespace may hold (spec.hard). The admission step of
// the request path (kubectl apply → API server → authentication → authorization →
// admission → etcd) refuses a create that would take status.used past status.hard and
// adds the object's usage to status.used; this controller is the other half: it copies
// spec.hard to status.hard and recomputes status.used from the objects themselves, so
// that usage freed by deletions (and pods reaching a terminal phase) comes back.
//
// Evaluators (evaluators.go) measure usage per kind: pods (pods, count/pods, cpu,
// memory, requests.* and limits.* of cpu, memory and ephemeral-storage; terminal pods
// count only in count/pods; scopes Terminating, NotTerminating, BestEffort,
// NotBestEffort, PriorityClass, CrossNamespacePodAffinity), services (services,
// services.nodeports, services.loadbalancers), persistentvolumeclaims
// (persistentvolumeclaims, requests.storage and their
// <class>.storageclass.storage.k8s.io/ forms), and object counts (configmaps, secrets,
// resourcequotas and any count/<resource>.<group>).
//
// Contract: New(cfg, client, factory) registers informers on the shared factory (the
// caller starts it); Run blocks until ctx ends. A quota is synced when it is created or
// its spec changes, when an object in its namespace is deleted or changes its usage,
// and every Config.Resync. count/<resource>.<group> of kinds beyond the watched ones
// are resolved through discovery and watched from the first quota that names them.
// The status computation (desiredStatus) and the evaluators are pure and tested
// directly.
package resourcequota
