// Package netpol enforces NetworkPolicy on a real node: it is the "CNI enforces
// NetworkPolicy" half of the step "CNI gives the pod an IP" of the flow kubectl apply →
// API server → scheduler → kubelet → container runtime starts the pod → CNI gives the pod
// an IP → kube-proxy routes Service traffic. One Agent runs per node and programs one
// nftables table (family ip, default "kubelab-netpol") inside the node's network
// namespace.
//
// Semantics are those of networking.k8s.io/v1 NetworkPolicy for the IPv4 addresses of the
// pods on this node (spec.nodeName is the node, a pod IP is known, not hostNetwork, not
// Succeeded or Failed):
//
//   - A pod selected by no policy of type Ingress accepts all ingress; once at least one
//     selects it, only traffic matching some ingress rule of some selecting policy is
//     allowed (the union). Egress likewise for the traffic the pod sends.
//   - Peers: podSelector (pods of the policy's namespace), namespaceSelector (pods of the
//     matching namespaces; every namespace carries kubernetes.io/metadata.name=<name>),
//     both together, ipBlock cidr minus except. Empty from/to means every peer, empty
//     ports every port. Peer pods are all pods of the cluster with an IPv4 pod IP that are
//     not hostNetwork and not Succeeded or Failed.
//   - Ports: protocol TCP (default), UDP or SCTP, numeric port with optional endPort, or a
//     named port. An ingress named port is resolved against the selected pod's container
//     ports; an egress named port against the destination pod's, so it allows only
//     destinations that are pods with that port (an ipBlock peer allows the pods whose
//     addresses it covers). A named port the pod does not have allows nothing.
//   - Replies of allowed connections pass (ct state established,related accept comes
//     first). A pod reaching itself through a Service address (DNAT'd back to it, which
//     crosses forward) is not subject to its own policies. DNS and everything else are
//     not special-cased.
//   - An invalid part of a policy (selector, peer, port, in the API's field error form) is
//     logged and allows nothing; an invalid podSelector makes the policy select nothing;
//     the valid rest applies.
//
// Where: one base chain "forward" (hook forward, priority filter) sees pod-to-pod traffic
// on the node's bridge (net.bridge.bridge-nf-call-iptables=1 makes bridged IPv4 traffic
// traverse the ip forward hook) and traffic between the node's pods and other nodes.
// Service traffic reaches forward already DNAT'd, so policies apply to the real
// destination pod. The chain jumps, through the verdict maps "egress-pods" (by source
// address) and "ingress-pods" (by destination address), into one chain per isolated pod
// and direction ("egress-<ns>/<pod>", "ingress-<ns>/<pod>"). Such a chain ends in drop and
// returns for allowed traffic, so a packet between two local pods passes the sender's
// egress chain and then the receiver's ingress chain.
//
// Traffic from the node itself (kubelet probes) is always allowed, as Kubernetes
// requires, without a rule for it: kubelab's kubelet probes a pod from inside the pod's
// own network namespace, so a probe never leaves the pod; and a socket of the node
// namespace reaches the node's pods through the output hook (then bridged by cni0), which
// this table does not hook. Traffic between a pod and its own node's addresses (input and
// output hooks) is not filtered either. Other nodes, and the control plane's VPC address
// where the API server and the cluster DNS server answer, are no pods: a policy that
// isolates a pod's egress lets traffic reach them (DNS included) only through an ipBlock.
//
// Peers are sets, one group per policy rule: "peers-<ns>/<policy>-<direction>-<i>" (pod
// addresses), "blocks-…" (ipBlock ranges, an interval set) and "named-…" (egress named
// ports: address . protocol . port of each destination pod). Pods coming and going change
// set and map elements only; chains are rewritten only when a pod's own rules or address change.
//
// Contract: Compute derives the desired policy model from Pods, Namespaces and
// NetworkPolicies and Render turns it into the table's content, both without I/O. Agent.Run
// watches the three resources and applies each change as one atomic nft transaction
// (element diffs against what it last applied; the first sync, a sync after a failure and
// one every FullSyncPeriod rewrite the whole table). Cleanup deletes the table.
package netpol
