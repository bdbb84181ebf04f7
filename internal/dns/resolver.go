package dns

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	mdns "github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
)

const (
	// schemaVersion is the version of the Kubernetes DNS schema the records follow,
	// answered as TXT at dns-version.<domain>.
	schemaVersion = "1.1.0"
	// maxCNAMEChain bounds how many CNAMEs inside the domain an answer follows.
	maxCNAMEChain = 8
	// The Service whose ClusterIPs are the nameserver's addresses (ns.dns.<domain>).
	nameserverNamespace, nameserverService = "kube-system", "kube-dns"
	// Reverse zones: PTR records of ClusterIPs and endpoint addresses.
	reverseZoneV4, reverseZoneV6 = "in-addr.arpa.", "ip6.arpa."
)

// reply is the answer to one question.
type reply struct {
	rcode             int
	authoritative     bool
	answer, ns, extra []mdns.RR
}

// result is what a name holds for a query type.
type result struct {
	// exists is false for a name that does not exist (NXDOMAIN).
	exists bool
	// cname is set for an alias (ExternalName Service); it then holds nothing else.
	cname         *mdns.CNAME
	answer, extra []mdns.RR
}

// resolver answers questions about the cluster domain and the reverse zones from a
// catalog. It is safe for concurrent use once listen is set.
type resolver struct {
	domain string // canonical: lower case, fully qualified
	ttl    uint32
	cat    *catalog
	serial func() uint32
	// listen are the server's own addresses: the nameserver's when the cluster has no
	// kube-system/kube-dns Service.
	listen []netip.Addr
	// hosts are names outside the zones the server answers itself (canonical name →
	// addresses), as a hosts file would.
	hosts map[string][]netip.Addr
}

// reverseZone is the reverse zone name (canonical) is in, "" if none.
func reverseZone(name string) string {
	for _, z := range []string{reverseZoneV4, reverseZoneV6} {
		if mdns.IsSubDomain(z, name) {
			return z
		}
	}
	return ""
}

// zoneOf is the zone of the canonical name the server is authoritative for, "" if none.
func (r *resolver) zoneOf(name string) string {
	if mdns.IsSubDomain(r.domain, name) {
		return r.domain
	}
	return reverseZone(name)
}

// resolve answers q: names outside the zones are REFUSED (the server's handler may
// forward them instead, see forwards); inside,
// the answer is authoritative, NXDOMAIN or NODATA carrying the zone's SOA.
func (r *resolver) resolve(q mdns.Question) reply {
	key := strings.ToLower(mdns.Fqdn(q.Name))
	if addrs, ok := r.hosts[key]; ok && (q.Qclass == mdns.ClassINET || q.Qclass == mdns.ClassANY) {
		// A name of Config.Hosts: its addresses, NODATA for other types.
		want := func(t uint16) bool { return q.Qtype == t || q.Qtype == mdns.TypeANY }
		return reply{rcode: mdns.RcodeSuccess, authoritative: true, answer: r.addrRecords(mdns.Fqdn(q.Name), addrs, want)}
	}
	zone := r.zoneOf(key)
	if zone == "" || (q.Qclass != mdns.ClassINET && q.Qclass != mdns.ClassANY) ||
		q.Qtype == mdns.TypeAXFR || q.Qtype == mdns.TypeIXFR {
		return reply{rcode: mdns.RcodeRefused}
	}
	rep := reply{rcode: mdns.RcodeSuccess, authoritative: true}
	owner := mdns.Fqdn(q.Name)
	seen := map[string]bool{key: true}
	for {
		res := r.lookup(owner, key, zone, q.Qtype)
		if !res.exists {
			rep.rcode = mdns.RcodeNameError
			rep.ns = []mdns.RR{r.soa(zone)}
			return rep
		}
		if res.cname != nil {
			rep.answer = append(rep.answer, res.cname)
			if q.Qtype == mdns.TypeCNAME || q.Qtype == mdns.TypeANY {
				return rep
			}
			// Follow aliases inside the domain; the client follows the others (and
			// the server refuses them).
			target := strings.ToLower(res.cname.Target)
			if !mdns.IsSubDomain(r.domain, target) || seen[target] || len(seen) > maxCNAMEChain {
				return rep
			}
			seen[target] = true
			owner, key, zone = res.cname.Target, target, r.domain
			continue
		}
		rep.answer = append(rep.answer, res.answer...)
		rep.extra = append(rep.extra, res.extra...)
		if len(res.answer) == 0 {
			rep.ns = []mdns.RR{r.soa(zone)}
		}
		return rep
	}
}

// lookup is what the canonical name key (written owner in the answer) holds for qtype.
func (r *resolver) lookup(owner, key, zone string, qtype uint16) result {
	want := func(t uint16) bool { return qtype == t || qtype == mdns.TypeANY }
	if zone != r.domain {
		return r.lookupReverse(owner, key, zone, want)
	}
	if key == r.domain {
		res := result{exists: true}
		if want(mdns.TypeSOA) {
			res.answer = append(res.answer, r.soa(owner))
		}
		if want(mdns.TypeNS) {
			ns := r.nameserverName()
			res.answer = append(res.answer, &mdns.NS{Hdr: r.hdr(owner, mdns.TypeNS), Ns: ns})
			res.extra = r.addrRecords(ns, r.nameserverAddrs(), func(t uint16) bool { return t == mdns.TypeA || t == mdns.TypeAAAA })
		}
		return res
	}
	labels := mdns.SplitDomainName(strings.TrimSuffix(key, "."+r.domain))
	n := len(labels)
	switch labels[n-1] {
	case "svc":
		return r.lookupService(owner, labels[:n-1], want)
	case "pod":
		return r.lookupPod(owner, labels[:n-1], want)
	case "dns":
		switch {
		case n == 1:
			return result{exists: true}
		case n == 2 && labels[0] == "ns":
			return result{exists: true, answer: r.addrRecords(owner, r.nameserverAddrs(), want)}
		}
	case "dns-version":
		if n == 1 {
			res := result{exists: true}
			if want(mdns.TypeTXT) {
				res.answer = []mdns.RR{&mdns.TXT{Hdr: r.hdr(owner, mdns.TypeTXT), Txt: []string{schemaVersion}}}
			}
			return res
		}
	}
	return result{}
}

// lookupService answers the names under svc.<domain>; rest are the labels before "svc".
func (r *resolver) lookupService(owner string, rest []string, want func(uint16) bool) result {
	n := len(rest)
	if n == 0 {
		return result{exists: true}
	}
	if !r.cat.namespaceExists(rest[n-1]) {
		return result{}
	}
	if n == 1 {
		return result{exists: true}
	}
	svc := r.cat.service(rest[n-1], rest[n-2])
	if svc == nil {
		return result{}
	}
	switch n {
	case 2:
		return r.serviceRecords(owner, svc, want)
	case 3:
		return r.endpointRecords(owner, svc, rest[0], want)
	case 4:
		if strings.HasPrefix(rest[0], "_") && strings.HasPrefix(rest[1], "_") {
			return r.portRecords(owner, svc, rest[0][1:], rest[1][1:], want)
		}
	}
	return result{}
}

// serviceName is <service>.<namespace>.svc.<domain>.
func (r *resolver) serviceName(svc *corev1.Service) string {
	return strings.ToLower(svc.Name + "." + svc.Namespace + ".svc." + r.domain)
}

// serviceRecords answers <service>.<namespace>.svc.<domain>: the ClusterIPs and an SRV
// record per port; for a headless Service its ready endpoints' addresses and an SRV
// record per endpoint and port (a headless Service without ready endpoints does not
// exist); for an ExternalName Service a CNAME.
func (r *resolver) serviceRecords(owner string, svc *corev1.Service, want func(uint16) bool) result {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		target := externalTarget(svc)
		if target == "" {
			return result{}
		}
		return result{exists: true, cname: &mdns.CNAME{Hdr: r.hdr(owner, mdns.TypeCNAME), Target: target}}
	}
	res := result{exists: true}
	if headless(svc) {
		eps := r.cat.endpoints(svc.Namespace, svc.Name)
		if len(eps) == 0 {
			return result{}
		}
		res.answer = r.addrRecords(owner, endpointAddrs(eps), want)
		if want(mdns.TypeSRV) {
			srv, extra := r.endpointSRV(owner, r.serviceName(svc), eps, "", "")
			res.answer, res.extra = append(res.answer, srv...), extra
		}
		return res
	}
	res.answer = r.addrRecords(owner, serviceIPs(svc), want)
	if want(mdns.TypeSRV) {
		srv, extra := r.serviceSRV(owner, svc, "", "")
		res.answer, res.extra = append(res.answer, srv...), extra
	}
	return res
}

// endpointRecords answers <label>.<service>.<namespace>.svc.<domain>: the addresses of
// the Service's ready endpoints with that hostname (or dashed address) and their SRV
// records. "_<protocol>" labels exist as the parents of the port names.
func (r *resolver) endpointRecords(owner string, svc *corev1.Service, label string, want func(uint16) bool) result {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return result{}
	}
	all := r.cat.endpoints(svc.Namespace, svc.Name)
	if proto, ok := strings.CutPrefix(label, "_"); ok {
		return result{exists: proto != "" && hasProtocol(svc, all, proto)}
	}
	var eps []endpoint
	for _, ep := range all {
		if ep.label == label {
			eps = append(eps, ep)
		}
	}
	if len(eps) == 0 {
		return result{}
	}
	res := result{exists: true, answer: r.addrRecords(owner, endpointAddrs(eps), want)}
	if want(mdns.TypeSRV) {
		srv, extra := r.endpointSRV(owner, r.serviceName(svc), eps, "", "")
		res.answer, res.extra = append(res.answer, srv...), extra
	}
	return res
}

// portRecords answers _<port>._<protocol>.<service>.<namespace>.svc.<domain>: SRV
// records of the named port, pointing at the Service name (or, headless, at each ready
// endpoint). A port name the Service does not have does not exist.
func (r *resolver) portRecords(owner string, svc *corev1.Service, port, proto string, want func(uint16) bool) result {
	if svc.Spec.Type == corev1.ServiceTypeExternalName || port == "" || proto == "" {
		return result{}
	}
	var srv, extra []mdns.RR
	if headless(svc) {
		srv, extra = r.endpointSRV(owner, r.serviceName(svc), r.cat.endpoints(svc.Namespace, svc.Name), port, proto)
	} else {
		srv, extra = r.serviceSRV(owner, svc, port, proto)
	}
	if len(srv) == 0 {
		return result{}
	}
	if !want(mdns.TypeSRV) {
		return result{exists: true}
	}
	return result{exists: true, answer: srv, extra: extra}
}

// serviceSRV are the SRV records (and the target's addresses) of a Service with
// ClusterIPs, for its ports matching port and proto ("" matches any).
func (r *resolver) serviceSRV(owner string, svc *corev1.Service, port, proto string) (srv, extra []mdns.RR) {
	target := r.serviceName(svc)
	seen := map[int32]bool{}
	for _, p := range svc.Spec.Ports {
		if !matchPort(port, proto, p.Name, p.Protocol) || seen[p.Port] {
			continue
		}
		seen[p.Port] = true
		srv = append(srv, &mdns.SRV{Hdr: r.hdr(owner, mdns.TypeSRV), Port: uint16(p.Port), Target: target})
	}
	if len(srv) > 0 {
		extra = r.addrRecords(target, serviceIPs(svc), func(uint16) bool { return true })
	}
	return weigh(srv), extra
}

// endpointSRV are the SRV records (and the targets' addresses) of endpoints, one per
// endpoint and port matching port and proto ("" matches any); the target is
// <label>.<service name>.
func (r *resolver) endpointSRV(owner, svcName string, eps []endpoint, port, proto string) (srv, extra []mdns.RR) {
	type key struct {
		target string
		port   int32
	}
	seenSRV := map[key]bool{}
	seenAddr := map[string]bool{}
	for _, ep := range eps {
		target := ep.label + "." + svcName
		for _, p := range ep.ports {
			if p.Port == nil || !matchPort(port, proto, deref(p.Name), deref(p.Protocol)) {
				continue
			}
			if k := (key{target, *p.Port}); !seenSRV[k] {
				seenSRV[k] = true
				srv = append(srv, &mdns.SRV{Hdr: r.hdr(owner, mdns.TypeSRV), Port: uint16(*p.Port), Target: target})
			}
			if a := target + " " + ep.addr.String(); !seenAddr[a] {
				seenAddr[a] = true
				extra = append(extra, r.addrRecord(target, ep.addr))
			}
		}
	}
	return weigh(srv), extra
}

// weigh gives the SRV records (all of priority 0) equal weights summing up to about 100.
func weigh(srv []mdns.RR) []mdns.RR {
	if len(srv) == 0 {
		return srv
	}
	w := uint16(max(1, 100/len(srv)))
	for _, rr := range srv {
		rr.(*mdns.SRV).Weight = w
	}
	return srv
}

func matchPort(port, proto, name string, protocol corev1.Protocol) bool {
	if protocol == "" {
		protocol = corev1.ProtocolTCP
	}
	return (port == "" || strings.EqualFold(port, name)) && (proto == "" || strings.EqualFold(proto, string(protocol)))
}

// hasProtocol tells whether the Service (or, headless, one of its endpoints) has a port
// of the protocol.
func hasProtocol(svc *corev1.Service, eps []endpoint, proto string) bool {
	for _, p := range svc.Spec.Ports {
		if matchPort("", proto, p.Name, p.Protocol) {
			return true
		}
	}
	for _, ep := range eps {
		for _, p := range ep.ports {
			if p.Port != nil && matchPort("", proto, deref(p.Name), deref(p.Protocol)) {
				return true
			}
		}
	}
	return false
}

// lookupPod answers the names under pod.<domain>: <dashed address>.<namespace>.pod.<domain>
// is that address for any valid address in an existing namespace (no pod is looked up).
func (r *resolver) lookupPod(owner string, rest []string, want func(uint16) bool) result {
	n := len(rest)
	if n == 0 {
		return result{exists: true}
	}
	if n > 2 || !r.cat.namespaceExists(rest[n-1]) {
		return result{}
	}
	if n == 1 {
		return result{exists: true}
	}
	ip, ok := undashed(rest[0])
	if !ok {
		return result{}
	}
	return result{exists: true, answer: r.addrRecords(owner, []netip.Addr{ip}, want)}
}

// lookupReverse answers names in a reverse zone: a ClusterIP's name is its Service's, an
// endpoint address's the endpoint's under each Service it belongs to. The names above
// full addresses exist (and hold nothing).
func (r *resolver) lookupReverse(owner, key, zone string, want func(uint16) bool) result {
	if key == zone {
		res := result{exists: true}
		if want(mdns.TypeSOA) {
			res.answer = []mdns.RR{r.soa(owner)}
		}
		return res
	}
	ip, partial, ok := reverseAddr(strings.TrimSuffix(key, "."+zone), zone)
	if !ok {
		return result{}
	}
	if partial {
		return result{exists: true}
	}
	names := r.ptrNames(ip)
	if len(names) == 0 {
		return result{}
	}
	res := result{exists: true}
	if want(mdns.TypePTR) {
		for _, name := range names {
			res.answer = append(res.answer, &mdns.PTR{Hdr: r.hdr(owner, mdns.TypePTR), Ptr: name})
		}
	}
	return res
}

// ptrNames are the names of ip: its Service's when it is a ClusterIP, else the names of
// the ready endpoints having it.
func (r *resolver) ptrNames(ip netip.Addr) []string {
	if svcs := r.cat.servicesByIP(ip); len(svcs) > 0 {
		return []string{r.serviceName(svcs[0])}
	}
	var names []string
	for _, ep := range r.cat.endpointsByAddr(ip) {
		name := strings.ToLower(ep.label + "." + ep.service + "." + ep.namespace + ".svc." + r.domain)
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// reverseAddr parses the labels of a name in a reverse zone (without the zone): an
// address (partial when the labels are the start of one, e.g. "96.10"); ok is false
// when they are no address.
func reverseAddr(labels, zone string) (ip netip.Addr, partial, ok bool) {
	parts := mdns.SplitDomainName(labels)
	if zone == reverseZoneV4 {
		if len(parts) > 4 {
			return ip, false, false
		}
		var b [4]byte
		for i, p := range parts {
			v, err := strconv.ParseUint(p, 10, 8)
			if err != nil || (len(p) > 1 && p[0] == '0') {
				return ip, false, false
			}
			b[len(parts)-1-i] = byte(v)
		}
		if len(parts) < 4 {
			return ip, true, true
		}
		return netip.AddrFrom4(b), false, true
	}
	if len(parts) > 32 {
		return ip, false, false
	}
	var b [16]byte
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 16, 4)
		if err != nil || len(p) != 1 {
			return ip, false, false
		}
		nibble := len(parts) - 1 - i // position from the start of the address
		if nibble%2 == 0 {
			b[nibble/2] |= byte(v) << 4
		} else {
			b[nibble/2] |= byte(v)
		}
	}
	if len(parts) < 32 {
		return ip, true, true
	}
	return netip.AddrFrom16(b).Unmap(), false, true
}

// nameserverName is the name of the zone's nameserver, ns.dns.<domain>.
func (r *resolver) nameserverName() string { return "ns.dns." + r.domain }

// nameserverAddrs are the ClusterIPs of kube-system/kube-dns, else the server's own
// addresses.
func (r *resolver) nameserverAddrs() []netip.Addr {
	if svc := r.cat.service(nameserverNamespace, nameserverService); svc != nil {
		if ips := serviceIPs(svc); len(ips) > 0 {
			return ips
		}
	}
	return r.listen
}

// soa is the zones' SOA record, owned by owner (a zone's apex).
func (r *resolver) soa(owner string) *mdns.SOA {
	hdr := r.hdr(owner, mdns.TypeSOA)
	hdr.Ttl = min(r.ttl, 300)
	return &mdns.SOA{Hdr: hdr, Ns: r.nameserverName(), Mbox: "hostmaster." + r.domain, Serial: r.serial(),
		Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: r.ttl}
}

func (r *resolver) hdr(name string, t uint16) mdns.RR_Header {
	return mdns.RR_Header{Name: name, Rrtype: t, Class: mdns.ClassINET, Ttl: r.ttl}
}

// addrRecords are the A and AAAA records (as wanted) of the addresses, without
// duplicates, in random order (clients taking the first spread over them).
func (r *resolver) addrRecords(owner string, addrs []netip.Addr, want func(uint16) bool) []mdns.RR {
	out := make([]mdns.RR, 0, len(addrs))
	seen := make(map[netip.Addr]bool, len(addrs))
	for _, ip := range addrs {
		if seen[ip] || (ip.Is4() && !want(mdns.TypeA)) || (ip.Is6() && !want(mdns.TypeAAAA)) {
			continue
		}
		seen[ip] = true
		out = append(out, r.addrRecord(owner, ip))
	}
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func (r *resolver) addrRecord(owner string, ip netip.Addr) mdns.RR {
	if ip.Is4() {
		return &mdns.A{Hdr: r.hdr(owner, mdns.TypeA), A: ip.AsSlice()}
	}
	return &mdns.AAAA{Hdr: r.hdr(owner, mdns.TypeAAAA), AAAA: ip.AsSlice()}
}

func endpointAddrs(eps []endpoint) []netip.Addr {
	out := make([]netip.Addr, 0, len(eps))
	for _, ep := range eps {
		out = append(out, ep.addr)
	}
	return out
}

// externalTarget is the fully qualified externalName of a Service, "" when it is no
// domain name (an address, which an alias cannot point at).
func externalTarget(svc *corev1.Service) string {
	name := strings.TrimSpace(svc.Spec.ExternalName)
	if name == "" {
		return ""
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return ""
	}
	name = mdns.Fqdn(name)
	if _, ok := mdns.IsDomainName(name); !ok {
		return ""
	}
	return name
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
