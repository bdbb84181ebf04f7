// Package proxy is kubelab's service proxy, the last step of the flow "kubectl apply → API
// server → scheduler → kubelet → container runtime starts the pod → CNI gives the pod an
// IP → kube-proxy routes Service traffic": on each node it turns Services and their
// EndpointSlices into nftables rules in the node's network namespace, so that traffic to a
// ClusterIP or a NodePort reaches a ready pod. It works as kube-proxy's nftables mode does,
// through sigs.k8s.io/knftables (which runs the nft binary; every command runs inside the
// node's namespace).
//
// The table (ip family, "kubelab-proxy" by default) holds:
//   - base chains nat-prerouting and nat-output (priority dstnat) jumping to "services",
//     which looks up `ip daddr . meta l4proto . th dport` in the verdict map service-ips
//     (ClusterIPs) and, for the node's addresses (set nodeport-ips), `meta l4proto . th
//     dport` in service-nodeports;
//   - per Service port a chain "service-<hash>-<ns>/<name>/<proto>/<port>" that DNATs with
//     `dnat ip addr . port to numgen random mod N map @dnat-service-<hash>`, a map of its own
//     from index to endpoint "ip . port" (the port EndpointSlices report, a named
//     targetPort resolved): an endpoint change rewrites that map's elements, and the rule
//     only when N changes, and no chain exists per endpoint;
//   - in "services", one rule that marks traffic to any ClusterIP (set cluster-ips) from
//     outside the cluster CIDR for masquerade, and in "masquerading" one that marks DNATed
//     traffic whose source is its destination (an endpoint reaching itself through its
//     Service; the set hairpin holds every endpoint's "ip . ip", an element shared by the
//     Services that have the endpoint);
//   - for a NodePort, a chain "external-…" that masquerades and goes on to the Service
//     chain, or with externalTrafficPolicy Local keeps the client address and goes on to
//     "local-…", which balances over the endpoints on this node only (pods and the node
//     itself still reach every endpoint);
//   - for sessionAffinity ClientIP, which needs to know the endpoint chosen, the Service
//     chain balances instead with `numgen random mod N vmap @lb-<chain>` over one chain
//     "endpoint-…" per endpoint, with a set "affinity-…" per endpoint keyed by client
//     address with the Service's timeout (default 10800 s): the endpoint chain records the
//     client, the Service chain sends a recorded client back to the same endpoint;
//   - for Service ports without usable endpoints, elements of no-endpoint-services and
//     no-endpoint-nodeports that reject (TCP reset, ICMP port unreachable otherwise) from
//     filter chains at prerouting and output (before the routing decision, so no route for
//     the Service range is needed in the node) and at input (NodePorts); traffic to a
//     ClusterIP port the Service does not have is rejected after DNAT (set cluster-ips);
//   - nat-postrouting masquerading what was marked (mark 0x4000).
//
// Usable endpoints are the ready ones; when a port has none, its serving endpoints that
// are terminating. Local ones are those whose nodeName is this node. Services of type
// ExternalName, headless Services, Services without an IPv4 ClusterIP and those labelled
// service.kubernetes.io/service-proxy-name get nothing; externalIPs and load-balancer IPs
// are not programmed. For a LoadBalancer Service of externalTrafficPolicy Local, the proxy
// serves spec.healthCheckNodePort on the node over HTTP as kube-proxy does: 200 and the
// count of local ready endpoints while there are some, else 503 (healthcheck.go).
//
// Contract: ComputeServiceState is the pure function from a Service and its EndpointSlices
// to the objects the Service needs. Run watches Services and EndpointSlices; each sync is
// one nft transaction, in which the elements of one set or map go in one command. The
// first sync, one every SyncPeriod and one after a failed sync are full (every chain
// rewritten, leftovers of earlier runs deleted); the others rewrite only the chains, maps
// and elements of the Services that changed, and delete those of Services that are gone.
// After each sync, UDP conntrack entries the change made stale are deleted (conntrack.go).
// The table stays when Run returns, so Services keep working across a restart of the
// proxy; Cleanup deletes it at the node's teardown.
package proxy
