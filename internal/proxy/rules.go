package proxy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// Params are the node-wide inputs of a Service's rules.
type Params struct {
	// NodeName makes endpoints on this node local.
	NodeName string
	// ClusterCIDR is the pods' range: traffic from outside it is masqueraded.
	ClusterCIDR string
}

// ServiceState is the nftables content one Service needs on a node: its chains with their
// rules, its affinity sets and its elements of the shared maps and sets. Two states are
// equal when the Service needs no change.
type ServiceState struct {
	// Chains, sorted by name; every rule is in nft syntax.
	Chains []Chain
	// Maps are the load-balancing maps, one per chain that load-balances, sorted by name.
	Maps []LBMap
	// Sets are the ClientIP affinity sets, one per reachable endpoint, sorted by name.
	Sets []AffinitySet
	// Elements go into the table's shared maps and sets.
	Elements []Element
	// UDP are the Service's UDP ports, for the conntrack cleanup (nothing in nft).
	UDP []UDPPort
}

// Chain is a regular chain and its rules in order.
type Chain struct {
	Name  string
	Rules []string
}

// LBMap maps the value of `numgen random mod N` to endpoints: Values[i] is the value for
// i, an endpoint's "ip . port" (DNAT maps) or a verdict (maps of Services with ClientIP
// affinity). Type is the type of its values, as typeof: "verdict" or "ip daddr . tcp dport"
// (the port of the Service's protocol).
type LBMap struct {
	Name   string
	Type   string
	Values []string
}

// AffinitySet remembers for Timeout the clients (source addresses) an endpoint served.
type AffinitySet struct {
	Name    string
	Timeout time.Duration
}

// Element is an element of the shared set Set or the shared map Map (one of the two is
// set); Value is a map element's verdict. A Shared element may be needed by several
// Services (the hairpin pair of an endpoint several Services share): it stays while one of
// them needs it.
type Element struct {
	Set     string
	Map     string
	Key     []string
	Value   string
	Comment string
	Shared  bool
}

// id identifies the element within the table.
func (e *Element) id() string {
	return e.Set + e.Map + " " + strings.Join(e.Key, " . ")
}

// ComputeServiceState is what svc needs, given its EndpointSlices: nil for a Service that
// gets nothing (ExternalName, headless, no IPv4 ClusterIP, owned by another proxy).
//
// Per port: the ClusterIP . protocol . port element of service-ips goes to the port's
// cluster chain "service-…" (or to its local chain "local-…" with internalTrafficPolicy
// Local), which DNATs with `dnat ip addr . port to numgen random mod N map @dnat-…`, a map
// of the chain's own from index to endpoint "ip . port", so that an endpoint change
// rewrites only that map (and the rule when N changes) and no chain is jumped to per
// endpoint. (Traffic to any ClusterIP from outside the cluster CIDR is masqueraded by one
// rule of the table's own.) A NodePort's protocol . nodePort element of service-nodeports
// goes to the external chain "external-…", which masquerades and continues to the cluster
// chain, or with externalTrafficPolicy Local keeps the client's address and continues to
// the local chain (pods and the node itself still reach every endpoint). Every endpoint's
// "ip . ip" pair is an element of the shared set hairpin, which masquerades an endpoint
// reaching itself through the Service.
//
// ClientIP affinity needs to know the endpoint chosen, so such a port load-balances with
// `numgen random mod N vmap @lb-<chain>` over one chain "endpoint-…" per endpoint instead,
// with a set per endpoint keyed by client address with the Service's timeout, which the
// endpoint chain updates and the Service chain consults before load-balancing. A port
// without usable endpoints gets instead an element of no-endpoint-services (and
// no-endpoint-nodeports) whose verdict rejects its traffic.
func ComputeServiceState(svc *v1.Service, eps []*discovery.EndpointSlice, p Params) *ServiceState {
	ports := servicePorts(svc)
	if len(ports) == 0 {
		return nil
	}
	st := &ServiceState{}
	st.Elements = append(st.Elements, Element{Set: clusterIPsSet, Key: []string{ports[0].clusterIP.String()}})
	hairpins := map[string]bool{}
	for i := range ports {
		st.addPort(&ports[i], endpointsFor(&ports[i], eps, p.NodeName), p, hairpins)
	}
	slices.SortFunc(st.Chains, func(a, b Chain) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(st.Maps, func(a, b LBMap) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(st.Sets, func(a, b AffinitySet) int { return strings.Compare(a.Name, b.Name) })
	return st
}

func (st *ServiceState) addPort(sp *servicePort, eps []endpoint, p Params, hairpins map[string]bool) {
	proto := strings.ToLower(string(sp.protocol))
	port := strconv.Itoa(int(sp.port))
	portName := sp.namespace + "/" + sp.name + ":" + sp.portName
	base := serviceChainBase(sp)
	clusterChain := clusterChainPrefix + base
	localChain := localChainPrefix + base
	externalChain := externalChainPrefix + base

	cluster, local, reachable, hasAny := categorizeEndpoints(eps, sp)
	usesClusterChain := len(cluster) > 0 && sp.usesClusterEndpoints()
	usesLocalChain := len(local) > 0 && sp.usesLocalEndpoints()

	// ClusterIP traffic goes to internalChain; NodePort traffic to externalChain and on to
	// externalPolicyChain.
	internalChain, hasInternal := clusterChain, hasAny
	if sp.internalLocal {
		internalChain, hasInternal = localChain, len(local) > 0
	}
	externalPolicyChain, hasExternal := clusterChain, hasAny
	if sp.externalLocal {
		externalPolicyChain, hasExternal = localChain, len(local) > 0
	}
	// The external chain is needed even without local endpoints: it still short-circuits
	// traffic from pods and from the node itself to every endpoint.
	usesExternalChain := hasAny && sp.externallyAccessible()

	// Without endpoints at all the traffic is rejected; with endpoints but none for a
	// Local policy it is dropped, as nothing else would answer it.
	internalVerdict, externalVerdict := "drop", "drop"
	if !hasAny {
		internalVerdict, externalVerdict = "goto "+rejectChain, "goto "+rejectChain
	}

	if hasInternal {
		st.Elements = append(st.Elements, Element{Map: serviceIPsMap,
			Key: []string{sp.clusterIP.String(), proto, port}, Value: "goto " + internalChain})
	} else {
		st.Elements = append(st.Elements, Element{Map: noEndpointServicesMap,
			Key: []string{sp.clusterIP.String(), proto, port}, Value: internalVerdict, Comment: portName})
	}
	if sp.externallyAccessible() {
		nodePort := strconv.Itoa(int(sp.nodePort))
		if usesExternalChain {
			st.Elements = append(st.Elements, Element{Map: serviceNodePortsMap,
				Key: []string{proto, nodePort}, Value: "goto " + externalChain})
		}
		if !hasExternal {
			st.Elements = append(st.Elements, Element{Map: noEndpointNodePortsMap,
				Key: []string{proto, nodePort}, Value: externalVerdict, Comment: portName})
		}
	}

	if usesExternalChain {
		var rules []string
		if !sp.externalLocal {
			// The endpoint may be on another node: masquerade so that replies return.
			rules = append(rules, "jump "+markMasqChain)
		} else {
			// Pods and the node itself reach every endpoint, as through an external
			// load balancer; the node's own traffic is masqueraded (its source would be
			// the node address the endpoint cannot answer directly).
			if usesClusterChain {
				rules = append(rules, fmt.Sprintf("ip saddr %s goto %s", p.ClusterCIDR, clusterChain))
			}
			rules = append(rules, "fib saddr type local jump "+markMasqChain)
			if usesClusterChain {
				rules = append(rules, "fib saddr type local goto "+clusterChain)
			}
		}
		if hasExternal {
			rules = append(rules, "goto "+externalPolicyChain)
		}
		st.Chains = append(st.Chains, Chain{Name: externalChain, Rules: rules})
	}

	if sp.protocol == v1.ProtocolUDP {
		u := UDPPort{ClusterIP: sp.clusterIP.String(), Port: sp.port}
		if sp.externallyAccessible() {
			u.NodePort = sp.nodePort
		}
		for _, e := range reachable {
			u.Endpoints = append(u.Endpoints, e.ip.String())
		}
		st.UDP = append(st.UDP, u)
	}
	for _, e := range reachable {
		ip := e.ip.String()
		if !hairpins[ip] {
			hairpins[ip] = true
			st.Elements = append(st.Elements, Element{Set: hairpinSet, Key: []string{ip, ip}, Shared: true})
		}
	}

	if sp.affinity == 0 {
		loadBalance := func(chain string, eps []endpoint) {
			var rules []string
			m := LBMap{Name: dnatMapName(chain), Type: "ip daddr . " + proto + " dport"}
			for _, e := range eps {
				m.Values = append(m.Values, e.ip.String()+" . "+strconv.Itoa(int(e.port)))
			}
			rules = append(rules, fmt.Sprintf("meta l4proto %s dnat ip addr . port to numgen random mod %d map @%s",
				proto, len(eps), m.Name))
			st.Chains = append(st.Chains, Chain{Name: chain, Rules: rules})
			st.Maps = append(st.Maps, m)
		}
		if usesClusterChain {
			loadBalance(clusterChain, cluster)
		}
		if usesLocalChain {
			loadBalance(localChain, local)
		}
		return
	}

	// Each endpoint's name base, hashed once.
	bases := make(map[endpoint]string, len(reachable))
	for _, e := range reachable {
		bases[e] = endpointChainBase(sp, e)
	}
	endpointChain := func(e endpoint) string { return endpointChainPrefix + bases[e] }
	affinitySet := func(e endpoint) string { return affinitySetPrefix + bases[e] }
	loadBalance := func(chain string, eps []endpoint) {
		var rules []string
		for _, e := range eps {
			rules = append(rules, fmt.Sprintf("ip saddr @%s goto %s", affinitySet(e), endpointChain(e)))
		}
		m := LBMap{Name: lbMapPrefix + chain, Type: "verdict"}
		for _, e := range eps {
			m.Values = append(m.Values, "goto "+endpointChain(e))
		}
		rules = append(rules, fmt.Sprintf("numgen random mod %d vmap @%s", len(eps), m.Name))
		st.Chains = append(st.Chains, Chain{Name: chain, Rules: rules})
		st.Maps = append(st.Maps, m)
	}
	if usesClusterChain {
		loadBalance(clusterChain, cluster)
	}
	if usesLocalChain {
		loadBalance(localChain, local)
	}

	for _, e := range reachable {
		st.Sets = append(st.Sets, AffinitySet{Name: affinitySet(e), Timeout: sp.affinity})
		st.Chains = append(st.Chains, Chain{Name: endpointChain(e), Rules: []string{
			fmt.Sprintf("update @%s { ip saddr }", affinitySet(e)),
			fmt.Sprintf("meta l4proto %s dnat to %s", proto, e),
		}})
	}
}
