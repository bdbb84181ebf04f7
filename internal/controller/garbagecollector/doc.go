// Package garbagecollector is the garbage collector of the controller-manager: it
// deletes objects whose owners are gone, following metadata.ownerReferences (the pods a
// ReplicaSet creates carry it as their owner; when the owner goes away, its dependents
// are garbage-collected).
//
// How: it discovers every resource that can be listed, watched and deleted (again every
// Config.DiscoveryPeriod, so new kinds are picked up), watches each through the metadata
// client, and keeps a graph of owner → dependents keyed by UID (graph.go). Decisions
// are pure functions (decide.go):
//   - Background (kubectl's default): once an owner is gone, each dependent with no
//     remaining live owner is deleted (with the propagation its own finalizers ask for);
//     references to owners that are gone are removed from dependents that still have a
//     live owner.
//   - Foreground: the API server gives the owner the "foregroundDeletion" finalizer; the
//     collector deletes its dependents (dependents that have dependents of their own are
//     deleted in the foreground too) and removes the finalizer once no dependent with
//     blockOwnerDeletion=true is left.
//   - Orphan: the API server gives the owner the "orphan" finalizer; the collector removes
//     the owner's reference from each dependent, then the finalizer.
//
// Owners are looked up in the graph, else live through the metadata client (a cache
// that has not seen an owner yet must not get its dependents deleted). Every write is
// conditional on the object's UID and resourceVersion. It talks to the API server only
// through client-go (discovery, the metadata client and metadata informers).
package garbagecollector
