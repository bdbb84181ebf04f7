// Package vpc is the network under kubelab's real nodes: the machine's EC2 VPC and the
// nodes' places on it, made of network namespaces.
//
// A cluster's VPC is a namespace holding the bridge vpc0 and nothing else: no uplink, no
// route out; what a pod or node sends outside the cluster leaves only through the NAT
// gateway (internal/natgateway), whose rules and listener are in this namespace. The VPC
// router's address RouterIP, the nodes' default gateway, is on that bridge (it forwards
// within the VPC only and drops the rest; the NAT gateway listens there), and so is the
// control plane's, ControlPlaneIP; the API server, the EC2 endpoint and the cluster DNS
// listen there (Listen and ListenPacket make sockets inside a namespace for a process that runs in
// the host's). Each node is a namespace of its own with eth0 on vpc0, addressed with the
// private IP and MAC the cloud gave its instance at RunInstances, a default route via the
// router, the instance metadata
// address 169.254.169.254 on its loopback, IPv4 forwarding on and bridged IPv4 traffic
// passed through netfilter (the service proxy and NetworkPolicy rules see pod traffic on
// the node's pod bridge). The node's pod bridge, overlay device and rules are made by the
// CNI plugin, the overlay agent and the proxy inside that namespace.
//
// The Fabric makes the cloud's elastic network interfaces real (fabric.go): an interface
// attached to a node's instance at device index N ≥ 1 is the node's link ethN, and every
// private address of an attached interface is delivered to its node, through permanent
// extern_learn neighbour entries in every node and in the VPC, so that a pod on a
// secondary address is reached without the address on any interface of the node. The
// cloud drives it (cloud.Config.Fabric, wired by the cluster) and names the instances;
// EnsureNode's Node.InstanceID says which node runs which.
//
// This is the step "CNI gives the pod an IP" seen from below: where the node's pod network
// is attached, the wire between nodes that the overlay runs over, and the VPC's own
// delivery of interface addresses that the VPC CNI mode uses.
//
// The namespaces are named files under /run/netns, so `ip netns exec <name> …` works on
// them; their names carry a hash of the cluster's data dir so that two clusters on one
// machine never share one. Ensure and EnsureNode are idempotent: a start after a kill -9
// finds the namespaces and the pods' network as they were and keeps them. Remove deletes
// every namespace of the cluster, and with them every link, address, route and nft table
// in them; the host's namespace is never changed.
package vpc
