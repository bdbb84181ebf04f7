package cluster

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"

	"github.com/kubelab/kubelab/internal/vpc"
)

// clusterNetwork is the API server's way into the cluster's network (pod IPs, ClusterIPs),
// which the machine's namespace has no route to: a connection is made from inside a
// node's network namespace, where the overlay reaches every pod and the node's service
// proxy translates ClusterIPs (its nftables output hook handles the namespace's own
// connections too). The node is the first of the cluster's nodes whose namespace exists.
type clusterNetwork struct {
	vpc   *vpc.VPC
	nodes atomic.Pointer[[]string] // the cluster's nodes, in order; nil before boot names them
	// exists says whether a network namespace is bound at a path (vpc.NamespaceExists).
	exists func(path string) bool
}

func newClusterNetwork(v *vpc.VPC) *clusterNetwork {
	return &clusterNetwork{vpc: v, exists: vpc.NamespaceExists}
}

// setNodes names the nodes whose namespaces connections may start from.
func (n *clusterNetwork) setNodes(nodes []Node) {
	names := make([]string, len(nodes))
	for i, node := range nodes {
		names[i] = node.Name
	}
	n.nodes.Store(&names)
}

// DialContext connects to addr from inside a node's network namespace.
func (n *clusterNetwork) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var names []string
	if p := n.nodes.Load(); p != nil {
		names = *p
	}
	paths := make([]string, len(names))
	for i, name := range names {
		paths[i] = n.vpc.NodePath(name)
	}
	path, ok := firstExisting(paths, n.exists)
	if !ok {
		return nil, fmt.Errorf("dial %s: no node's network namespace to reach the cluster network from (nodes %v)", addr, names)
	}
	return vpc.DialContext(path)(ctx, network, addr)
}

// loadBalancerDial is how the cloud's load balancers reach their targets: an address of
// the VPC (an instance's, for instance targets at a node port) from the VPC's namespace,
// as an ELB's nodes sit in the VPC's subnets and the packets arrive at the node from
// outside; any other (a pod's, for ip targets) from a node's namespace, where the overlay
// reaches every pod.
func loadBalancerDial(v *vpc.VPC, n *clusterNetwork) func(ctx context.Context, network, addr string) (net.Conn, error) {
	inVPC := netip.MustParsePrefix(vpc.CIDR)
	fromVPC := vpc.DialContext(v.Path())
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if ap, err := netip.ParseAddrPort(addr); err == nil && inVPC.Contains(ap.Addr()) {
			return fromVPC(ctx, network, addr)
		}
		return n.DialContext(ctx, network, addr)
	}
}

// firstExisting is the first of paths that exists.
func firstExisting(paths []string, exists func(string) bool) (string, bool) {
	for _, p := range paths {
		if exists(p) {
			return p, true
		}
	}
	return "", false
}
