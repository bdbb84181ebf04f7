// Package dns is the cluster DNS server of kubelab (the cluster's kube-dns): it gives
// Service names addresses, the step after "kube-proxy routes Service traffic" in the flow
// "kubectl apply → API server → scheduler → kubelet → container runtime starts the pod →
// CNI gives the pod an IP → kube-proxy routes Service traffic": a pod resolves
// web.default.svc.cluster.local through the nameserver its resolv.conf names (the kube-dns
// Service) and connects to the answer. It runs as a goroutine of the kubelab process;
// the caller makes its sockets (in real mode UDP and TCP 172.31.0.2:53 inside the VPC
// namespace) and hands them to Serve.
//
// The server watches Services, EndpointSlices and Namespaces through informers, answers
// nothing before their caches have synced, and then answers from the caches, so a change
// in the cluster shows in the next answer. It is authoritative for the cluster domain
// (Config.Domain, cluster.local by default) and for the reverse zones in-addr.arpa and
// ip6.arpa. Names are matched case-insensitively. Records, all with Config.TTL (5 s):
//   - <service>.<ns>.svc.<domain>: A/AAAA with the ClusterIPs; for a headless Service
//     (clusterIP None) the addresses of its ready endpoints (readiness unknown counts as
//     ready), and a headless Service without any does not exist; for an ExternalName
//     Service a CNAME to the external name (names inside the domain are followed in the
//     same answer, up to 8 aliases), and none for an external name that is an address.
//     SRV: one record per port targeting the Service name (headless: per endpoint and port
//     targeting the endpoint's name), the targets' addresses in the additional section,
//     priority 0 and equal weights.
//   - _<port>._<proto>.<service>.<ns>.svc.<domain>: SRV for the named port and protocol
//     (tcp, udp, sctp); an unknown port name does not exist. _<proto>.<service>… exists
//     (without records) when the Service has a port of that protocol.
//   - <hostname>.<service>.<ns>.svc.<domain>: A/AAAA (and SRV) of the Service's ready
//     endpoints with that hostname (StatefulSet pods of a headless Service); an endpoint
//     without hostname is named by its dashed address (10-244-1-5).
//   - <a-b-c-d>.<ns>.pod.<domain>: A with that address, AAAA for dashed IPv6 addresses, in
//     any existing namespace, without looking for the pod (the "insecure" pod mode).
//   - PTR in in-addr.arpa/ip6.arpa: a ClusterIP's name is its Service's; an endpoint
//     address's the endpoint's name under each Service it serves.
//   - The apex has SOA (ns.dns.<domain>, hostmaster.<domain>, a serial that moves with
//     every change, negative-caching time Config.TTL) and NS ns.dns.<domain>, whose
//     addresses are the ClusterIPs of kube-system/kube-dns, or else the address the UDP
//     socket is bound to; dns-version.<domain> has TXT "1.1.0".
//
// Answers: a name in a zone that does not exist is NXDOMAIN, a name that exists without
// records of the type (a namespace, svc.<domain>, a Service asked for TXT, an address
// asked for the other family) is NOERROR without answer (NODATA); both carry the zone's
// SOA in the authority section and are authoritative. The reverse zones answer NXDOMAIN
// for addresses that are no ClusterIP nor endpoint. Zone transfers and classes other than
// IN are REFUSED in the zones.
//
// Names of Config.Hosts (in kubelab the VPC's own: the EC2 endpoint's name) are answered
// as a hosts file would: A and AAAA with their addresses, NODATA for other types.
//
// Other names outside the zones go to Config.Upstreams (the machine's resolver, as CoreDNS's
// forward plugin sends them to the nameservers of the node's resolv.conf), tried in order
// through Config.Dial (in kubelab, the cluster's way out of the VPC), over the
// transport the client used; so do reverse names of addresses the cluster has no record
// of (CoreDNS's fallthrough for in-addr.arpa and ip6.arpa). A name goes up as the client
// asked it: the client's resolver has applied its search list and ndots already, and
// names under the cluster domain never leave. The upstream's answer is passed on as it
// came (cut to the client's UDP buffer like the server's own); when no upstream answers
// within 2 seconds each, SERVFAIL. Without upstreams (kubelab up --offline) names
// outside the zones are REFUSED and reverse names the cluster lacks are NXDOMAIN.
//
// Over UDP an answer larger than the client's EDNS(0) buffer (512 bytes without EDNS(0),
// at most 1232) is truncated with the TC flag set, and the client asks again over TCP,
// where answers go up to 64 KiB. A records of one name come in random order, spreading
// clients over the endpoints.
package dns
