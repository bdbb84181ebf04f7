// Package cni gives a real node's pods their network, the step "CNI gives the pod an IP"
// of the flow: containerd creates each pod sandbox's network namespace and calls the CNI
// plugins named by the node's CNI configuration, which this package writes once the node
// has its podCIDR.
//
// The configuration chains the reference plugins (Debian's containernetworking-plugins,
// in /usr/lib/cni): bridge, with a bridge of the node's own (BridgeName of its data dir and name) that holds no
// address, so the host gets no route into the cluster's ranges; and host-local IPAM over
// the node's podCIDR, its allocations kept under the node's own data dir so that they
// survive restarts and no two nodes share a store. Pods on one node reach each other over
// that bridge; the overlay between nodes, Services and NetworkPolicy are not here.
//
// Contract: Writer.Run waits for spec.podCIDR on its Node and writes
// <ConfDir>/10-kubelab.conflist atomically (rewriting it only when it would change);
// RemoveBridge deletes the node's bridge at teardown.
package cni
