// Package nodeipam is the node IPAM controller of the controller-manager (upstream's
// range allocator): it gives every Node a pod CIDR out of the cluster CIDR
// (10.244.0.0/16 in /24s by default), in spec.podCIDR and spec.podCIDRs,
// which the CNI plugin and the overlay read. CIDRs of existing nodes are taken as they
// are at start; a deleted node's CIDR is free again. When the range is exhausted the node
// gets a CIDRNotAvailable event and is retried.
//
// Contract: Config{ClusterCIDR, NodeCIDRMaskSize}, New(cfg, client, factory), Run(ctx).
// The allocator (cidrset.go) is pure and tested with tables. It talks to the API server
// only through client-go (a Node informer and node patches).
package nodeipam
