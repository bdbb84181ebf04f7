// Package etcd runs the state store of the flow: every object that `kubectl apply` sends
// (seed 003 §1, "API server → etcd") ends up as a key /registry/<resource>/<ns>/<name> in
// the etcd this package starts, embedded in the data dir.
//
// Contract: New validates the Config; Run starts etcd, closes Ready() once it serves
// clients on the loopback address, and blocks until ctx ends, then stops etcd cleanly.
// Only the API server talks to it, over etcd's gRPC API. Use an external etcd cluster
// instead by giving the API server its endpoints (--etcd-servers); then this package is
// not started at all.
package etcd
