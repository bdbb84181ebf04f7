package proxy

import (
	"cmp"
	"net/netip"
	"slices"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// Labels the proxy reads.
const (
	// serviceNameLabel names the Service an EndpointSlice belongs to.
	serviceNameLabel = discovery.LabelServiceName
	// serviceProxyNameLabel on a Service hands it to another proxy.
	serviceProxyNameLabel = "service.kubernetes.io/service-proxy-name"
	// defaultAffinityTimeout is sessionAffinityConfig.clientIP.timeoutSeconds' default.
	defaultAffinityTimeout = 10800 * time.Second
)

// servicePort is what the rules need of one port of a Service.
type servicePort struct {
	namespace, name string
	portName        string
	protocol        v1.Protocol
	clusterIP       netip.Addr
	port            int32
	nodePort        int32
	// affinity is the ClientIP session affinity timeout; 0 is no affinity.
	affinity time.Duration
	// internalLocal: internalTrafficPolicy Local.
	internalLocal bool
	// externalLocal: externalTrafficPolicy Local on a port reachable from outside.
	externalLocal bool
}

// externallyAccessible reports whether the port takes traffic from outside the cluster
// (through a NodePort: the proxy programs neither externalIPs nor load-balancer IPs).
func (sp *servicePort) externallyAccessible() bool { return sp.nodePort != 0 }

// usesClusterEndpoints: the port needs the Cluster-policy endpoints (ClusterIP traffic with
// internalTrafficPolicy Cluster, or any external traffic: with Local policy they still
// serve the pods and the node itself).
func (sp *servicePort) usesClusterEndpoints() bool {
	return !sp.internalLocal || sp.externallyAccessible()
}

// usesLocalEndpoints: the port needs the endpoints on this node.
func (sp *servicePort) usesLocalEndpoints() bool {
	return sp.internalLocal || sp.externalLocal
}

// servicePorts are the ports of svc the proxy programs: none for ExternalName and headless
// Services, for Services without an IPv4 ClusterIP, and for those another proxy owns.
func servicePorts(svc *v1.Service) []servicePort {
	if svc == nil || svc.Spec.Type == v1.ServiceTypeExternalName {
		return nil
	}
	if _, other := svc.Labels[serviceProxyNameLabel]; other {
		return nil
	}
	clusterIP, ok := ipv4ClusterIP(svc)
	if !ok {
		return nil
	}
	var affinity time.Duration
	if svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
		affinity = defaultAffinityTimeout
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil && *c.ClientIP.TimeoutSeconds > 0 {
			affinity = time.Duration(*c.ClientIP.TimeoutSeconds) * time.Second
		}
	}
	internalLocal := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal
	var ports []servicePort
	for _, p := range svc.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = v1.ProtocolTCP
		}
		if proto != v1.ProtocolTCP && proto != v1.ProtocolUDP && proto != v1.ProtocolSCTP {
			continue
		}
		if p.Port <= 0 || p.Port > 65535 {
			continue
		}
		sp := servicePort{
			namespace:     svc.Namespace,
			name:          svc.Name,
			portName:      p.Name,
			protocol:      proto,
			clusterIP:     clusterIP,
			port:          p.Port,
			affinity:      affinity,
			internalLocal: internalLocal,
		}
		if (svc.Spec.Type == v1.ServiceTypeNodePort || svc.Spec.Type == v1.ServiceTypeLoadBalancer) && p.NodePort > 0 && p.NodePort <= 65535 {
			sp.nodePort = p.NodePort
		}
		sp.externalLocal = sp.externallyAccessible() && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
		ports = append(ports, sp)
	}
	return ports
}

// ipv4ClusterIP is the Service's IPv4 ClusterIP, if it has one.
func ipv4ClusterIP(svc *v1.Service) (netip.Addr, bool) {
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 {
		ips = []string{svc.Spec.ClusterIP}
	}
	for _, s := range ips {
		if s == "" || s == v1.ClusterIPNone {
			return netip.Addr{}, false
		}
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// endpoint is one backend of a service port, as its EndpointSlice reports it.
type endpoint struct {
	ip          netip.Addr
	port        int32
	ready       bool
	serving     bool
	terminating bool
	// local: the endpoint's nodeName is this node.
	local bool
}

// String is ip:port, the endpoint's identity and its DNAT target.
func (e endpoint) String() string {
	return e.ip.String() + ":" + strconv.Itoa(int(e.port))
}

// endpointsFor lists the endpoints of sp from the Service's EndpointSlices: the IPv4
// slices whose port has sp's name and protocol (its number is the resolved targetPort),
// one entry per address and port (a ready duplicate wins over one that is not), sorted
// by address and port.
func endpointsFor(sp *servicePort, eps []*discovery.EndpointSlice, nodeName string) []endpoint {
	seen := map[string]int{}
	var out []endpoint
	for _, slice := range eps {
		if slice == nil || slice.AddressType != discovery.AddressTypeIPv4 || slice.Labels[serviceNameLabel] != sp.name || slice.Namespace != sp.namespace {
			continue
		}
		port := int32(0)
		for _, p := range slice.Ports {
			proto := v1.ProtocolTCP
			if p.Protocol != nil {
				proto = *p.Protocol
			}
			name := ""
			if p.Name != nil {
				name = *p.Name
			}
			if name == sp.portName && proto == sp.protocol && p.Port != nil && *p.Port > 0 && *p.Port <= 65535 {
				port = *p.Port
				break
			}
		}
		if port == 0 {
			continue
		}
		for _, e := range slice.Endpoints {
			if len(e.Addresses) == 0 {
				continue
			}
			ip, err := netip.ParseAddr(e.Addresses[0])
			if err != nil || !ip.Is4() {
				continue
			}
			ready := e.Conditions.Ready == nil || *e.Conditions.Ready
			ep := endpoint{
				ip:          ip,
				port:        port,
				ready:       ready,
				serving:     e.Conditions.Serving == nil || *e.Conditions.Serving,
				terminating: e.Conditions.Terminating != nil && *e.Conditions.Terminating,
				local:       e.NodeName != nil && *e.NodeName == nodeName,
			}
			key := ep.String()
			if i, dup := seen[key]; dup {
				if ready && !out[i].ready {
					out[i] = ep
				}
				continue
			}
			seen[key] = len(out)
			out = append(out, ep)
		}
	}
	slices.SortFunc(out, func(a, b endpoint) int {
		if c := a.ip.Compare(b.ip); c != 0 {
			return c
		}
		return cmp.Compare(a.port, b.port)
	})
	return out
}

// categorizeEndpoints splits the endpoints of sp by the traffic they serve: cluster (every
// usable endpoint, for Cluster policy), local (the usable ones on this node, for Local
// policy) and reachable (the union, each endpoint once). Usable means ready; when none is
// ready, the serving endpoints that are terminating take their place so that connections
// are not dropped while a rollout finishes. hasAny reports whether the Service has a usable
// endpoint anywhere.
func categorizeEndpoints(eps []endpoint, sp *servicePort) (cluster, local, reachable []endpoint, hasAny bool) {
	if sp.usesClusterEndpoints() {
		cluster = filterEndpoints(eps, func(e endpoint) bool { return e.ready })
		if len(cluster) == 0 {
			cluster = filterEndpoints(eps, func(e endpoint) bool { return e.serving && e.terminating })
		}
		hasAny = len(cluster) > 0
	}
	if !sp.usesLocalEndpoints() {
		return cluster, nil, cluster, hasAny
	}
	var localReady, localServingTerminating bool
	for _, e := range eps {
		switch {
		case e.ready:
			hasAny = true
			localReady = localReady || e.local
		case e.serving && e.terminating:
			hasAny = true
			localServingTerminating = localServingTerminating || e.local
		}
	}
	switch {
	case localReady:
		local = filterEndpoints(eps, func(e endpoint) bool { return e.local && e.ready })
	case localServingTerminating:
		local = filterEndpoints(eps, func(e endpoint) bool { return e.local && e.serving && e.terminating })
	}
	if !sp.usesClusterEndpoints() {
		return nil, local, local, hasAny
	}
	reachable = append([]endpoint(nil), cluster...)
	inCluster := map[string]bool{}
	for _, e := range cluster {
		inCluster[e.String()] = true
	}
	for _, e := range local {
		if !inCluster[e.String()] {
			reachable = append(reachable, e)
		}
	}
	return cluster, local, reachable, hasAny
}

func filterEndpoints(eps []endpoint, keep func(endpoint) bool) []endpoint {
	var out []endpoint
	for _, e := range eps {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}
