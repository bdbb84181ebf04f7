// Package namespace is the namespace controller of the controller-manager: when a
// namespace is deleted (it turns Terminating), it deletes everything in it, resource by
// resource as discovery lists them, and once nothing is left removes the "kubernetes"
// finalizer through namespaces/finalize and deletes the namespace for good. Pods go
// first: as long as a pod of the namespace remains, nothing else in it is deleted.
//
// Of the controllers that keep desired and actual state together, this is the one that
// makes `kubectl delete namespace` empty a namespace. It is a client of the
// API server only (client-go informers, discovery and the metadata client), in the
// sample-controller shape: handlers enqueue names, sync(ctx, name) is idempotent.
package namespace
