package dns

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// Indexes the catalog adds to the informers' caches.
const (
	// indexClusterIP indexes Services by each of their ClusterIPs (canonical form).
	indexClusterIP = "dns.clusterIP"
	// indexSliceService indexes EndpointSlices by "<namespace>/<service>".
	indexSliceService = "dns.service"
	// indexSliceAddress indexes EndpointSlices by each endpoint address (canonical form).
	indexSliceAddress = "dns.address"
)

// catalog is what the server knows of the cluster: Services, EndpointSlices and
// Namespaces in the informers' caches (or in plain indexers in tests).
type catalog struct {
	services   cache.Indexer
	slices     cache.Indexer
	namespaces cache.Indexer
}

// endpoint is a ready endpoint address of a Service.
type endpoint struct {
	addr netip.Addr
	// label is the endpoint's name under the Service: its hostname, or its address with
	// the dots (or colons) replaced by dashes.
	label string
	ports []discoveryv1.EndpointPort
	// namespace and service name the Service the endpoint belongs to.
	namespace, service string
}

func serviceIndexers() cache.Indexers {
	return cache.Indexers{indexClusterIP: clusterIPIndex}
}

func sliceIndexers() cache.Indexers {
	return cache.Indexers{indexSliceService: sliceServiceIndex, indexSliceAddress: sliceAddressIndex}
}

// newCatalog is a catalog over empty indexers (objects are added with Add).
func newCatalog() *catalog {
	return &catalog{
		services:   cache.NewIndexer(cache.MetaNamespaceKeyFunc, serviceIndexers()),
		slices:     cache.NewIndexer(cache.MetaNamespaceKeyFunc, sliceIndexers()),
		namespaces: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
	}
}

func clusterIPIndex(obj any) ([]string, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, nil
	}
	var out []string
	for _, ip := range serviceIPs(svc) {
		out = append(out, ip.String())
	}
	return out, nil
}

func sliceServiceIndex(obj any) ([]string, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || s.Labels[discoveryv1.LabelServiceName] == "" {
		return nil, nil
	}
	return []string{s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]}, nil
}

func sliceAddressIndex(obj any) ([]string, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || s.AddressType == discoveryv1.AddressTypeFQDN {
		return nil, nil
	}
	var out []string
	for _, e := range s.Endpoints {
		for _, a := range e.Addresses {
			if ip, err := netip.ParseAddr(a); err == nil {
				out = append(out, ip.Unmap().String())
			}
		}
	}
	return out, nil
}

// serviceIPs are the parsed ClusterIPs of a Service that has them (none for headless and
// ExternalName Services, or before allocation).
func serviceIPs(svc *corev1.Service) []netip.Addr {
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return nil
	}
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	var out []netip.Addr
	for _, s := range ips {
		if ip, err := netip.ParseAddr(s); err == nil && !slices.Contains(out, ip.Unmap()) {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

// headless tells whether the Service's A records are its endpoints.
func headless(svc *corev1.Service) bool {
	return svc.Spec.Type != corev1.ServiceTypeExternalName && svc.Spec.ClusterIP == corev1.ClusterIPNone
}

func (c *catalog) namespaceExists(ns string) bool {
	_, ok, err := c.namespaces.GetByKey(ns)
	return err == nil && ok
}

// service is the Service namespace/name, nil when there is none.
func (c *catalog) service(ns, name string) *corev1.Service {
	obj, ok, err := c.services.GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return nil
	}
	svc, _ := obj.(*corev1.Service)
	return svc
}

// endpoints are the ready endpoints of the Service namespace/name, over all its slices.
func (c *catalog) endpoints(ns, name string) []endpoint {
	objs, err := c.slices.ByIndex(indexSliceService, ns+"/"+name)
	if err != nil {
		return nil
	}
	n := 0
	for _, obj := range objs {
		if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
			n += len(s.Endpoints)
		}
	}
	out := make([]endpoint, 0, n)
	for _, obj := range objs {
		if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
			out = appendEndpoints(out, s, netip.Addr{})
		}
	}
	return out
}

// endpointsByAddr are the ready endpoints with address ip, of any Service.
func (c *catalog) endpointsByAddr(ip netip.Addr) []endpoint {
	objs, err := c.slices.ByIndex(indexSliceAddress, ip.String())
	if err != nil {
		return nil
	}
	var out []endpoint
	for _, obj := range objs {
		if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
			out = appendEndpoints(out, s, ip)
		}
	}
	return out
}

// servicesByIP are the Services having ip as a ClusterIP.
func (c *catalog) servicesByIP(ip netip.Addr) []*corev1.Service {
	objs, err := c.services.ByIndex(indexClusterIP, ip.String())
	if err != nil {
		return nil
	}
	out := make([]*corev1.Service, 0, len(objs))
	for _, obj := range objs {
		if svc, ok := obj.(*corev1.Service); ok {
			out = append(out, svc)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Service) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out
}

// appendEndpoints appends the ready endpoints of slice s (only those with address only,
// when it is valid) to out. An endpoint whose readiness is unknown counts as ready.
func appendEndpoints(out []endpoint, s *discoveryv1.EndpointSlice, only netip.Addr) []endpoint {
	svc := s.Labels[discoveryv1.LabelServiceName]
	if svc == "" || s.AddressType == discoveryv1.AddressTypeFQDN {
		return out
	}
	for _, e := range s.Endpoints {
		if e.Conditions.Ready != nil && !*e.Conditions.Ready {
			continue
		}
		for _, a := range e.Addresses {
			ip, err := netip.ParseAddr(a)
			if err != nil {
				continue
			}
			ip = ip.Unmap()
			if only.IsValid() && ip != only {
				continue
			}
			var label string
			if e.Hostname != nil && *e.Hostname != "" {
				label = strings.ToLower(*e.Hostname)
			} else {
				label = dashed(ip)
			}
			out = append(out, endpoint{addr: ip, label: label, ports: s.Ports, namespace: s.Namespace, service: svc})
		}
	}
	return out
}

// dashed is the address as one DNS label: 10.244.1.5 → 10-244-1-5, fd00::5 → fd00--5
// (a trailing dash gets a 0: fd00:: → fd00--0).
func dashed(ip netip.Addr) string {
	if ip.Is4() {
		return strings.ReplaceAll(ip.String(), ".", "-")
	}
	s := strings.ReplaceAll(ip.String(), ":", "-")
	if strings.HasSuffix(s, "-") {
		s += "0"
	}
	return s
}

// undashed parses a pod's address label (the inverse of dashed): exactly three dashes
// and no "--" make an IPv4 address, anything else is tried as IPv6.
func undashed(label string) (netip.Addr, bool) {
	var s string
	if strings.Count(label, "-") == 3 && !strings.Contains(label, "--") {
		s = strings.ReplaceAll(label, "-", ".")
	} else {
		s = strings.ReplaceAll(label, "-", ":")
	}
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}
