// Package netns runs work inside a Linux network namespace named by its path (a bind
// mount such as /run/netns/<name>, or /proc/<pid>/ns/net): a function (Do), nftables
// transactions through knftables (NFTables), and netlink requests (Handle). The empty path
// means the caller's own namespace.
//
// Do runs the function on an OS thread locked to its goroutine, moved into the namespace
// for the call and back into the caller's after it (a thread that cannot go back is never
// given back to the Go scheduler); a process the function starts, nft included, is born in
// the namespace. Every call of the Interface NFTables returns that reaches the kernel runs
// that way. A netlink handle from Handle has its sockets in the namespace, so any thread
// may use it.
//
// It is a leaf: it imports no kubelab component, so the service proxy, the NetworkPolicy
// agent, the overlay agent and the VPC all use it for the step "program the node's
// network" without importing one another.
package netns
