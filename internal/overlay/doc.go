// Package overlay is the pod network between nodes, the part of the step "CNI gives
// the pod an IP" that makes that IP reachable from every other node: a pod's traffic
// to a pod on another node leaves its node through the overlay, and pod traffic to
// the VPC leaves masqueraded. The CNI plugin only joins pods to their node's bridge;
// this agent, one per node, joins the nodes' pod subnets.
//
// The agent works inside the node's network namespace (Config.NetNS) through a
// netlink handle made there, and runs nft there for its nftables table.
//
// In vxlan mode (the default) the node has one VXLAN device (Config.Device, VNI
// Config.VNI, UDP port Config.Port, local address = the underlay's IPv4 address,
// learning off, MTU = the underlay's − 50) holding the .0 address of the node's pod
// subnet as a /32. Its MAC is derived from the node name, so it stays the same when
// the device is made again; a device whose settings match is reused as it is. The
// agent publishes on its own Node the annotations AnnotationVTEPMAC (the device's
// MAC) and AnnotationNodeIP (the underlay address). For every remote node that has a
// spec.podCIDR inside the cluster CIDR and those annotations it keeps:
//
//	neighbour  <remote subnet>.0 lladdr <remote MAC>  dev <device>  permanent
//	fdb        <remote MAC> dst <remote node IP>       dev <device>  permanent
//	route      <remote podCIDR> via <remote subnet>.0 dev <device> onlink
//
// In direct mode (nodes on one L2 segment) there is no device, only AnnotationNodeIP
// and, per remote node, the route <remote podCIDR> via <remote node IP> dev
// <underlay>.
//
// Routes carry the rtnetlink protocol 75 so that the agent deletes only its own.
// Nodes are watched with an informer; each Node's key goes through a workqueue to
// one worker. A deleted node, or one whose podCIDR or annotations changed, has its
// stale entries deleted and the new ones set. A resync, at start and every
// Config.ResyncPeriod, compares everything the agent owns in the kernel (entries on
// its device, its routes inside the cluster CIDR) with what the Nodes want: it
// deletes entries of nodes the API does not have (left by a crash) and sets again
// those removed by hand; it also repairs the device and the table.
//
// Masquerade: the table TableName (family ip) holds one rule, at the srcnat hook,
// masquerading packets from the cluster CIDR to outside it that leave through the
// underlay, so that pods reach VPC addresses (the control plane's) that have no
// route back to pod subnets. Pod-to-pod traffic keeps its addresses.
//
// Contract: New(cfg, client) checks cfg; Run(ctx) sets up the node, fails at once
// when it cannot, and then reconciles until ctx ends. Cleanup removes the device,
// the routes and the table at node teardown. Package overlaytest captures the
// traffic on a VPC-side interface for tests.
package overlay
