// Package cni gives a real node's pods their network configuration, the step "CNI gives
// the pod an IP" of the flow: containerd creates each pod sandbox's network namespace and
// calls the CNI plugins that the node's configuration names, which this package writes
// once the node has its podCIDR.
//
// The configuration names one plugin, kubelab-cni (package plugin), with the node's network
// namespace: there it keeps the pod bridge cni0, whose address is the pods' gateway, and the
// host ends of the pods' veths; its IP allocations over the node's podCIDR live under the
// node's own data dir, so that they survive restarts and no two nodes share a store. The
// overlay between nodes, the Service rules and NetworkPolicy are other components' work in
// the same namespace.
//
// Contract: InstallPlugins fills the node's CNI bin dir (kubelab-cni and the reference
// loopback plugin containerd uses for the pods' lo); Writer.Run waits for spec.podCIDR on
// its Node and writes <ConfDir>/10-kubelab.conflist atomically, rewriting it only when it
// would change.
package cni
