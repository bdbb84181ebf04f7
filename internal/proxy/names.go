package proxy

import (
	"crypto/sha256"
	"encoding/base32"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"
)

// The table's fixed objects. Base chains are named "<type>-<hook>".
const (
	filterPreroutingChain         = "filter-prerouting"
	filterInputChain              = "filter-input"
	filterOutputChain             = "filter-output"
	filterPreroutingPostDNATChain = "filter-prerouting-post-dnat"
	filterOutputPostDNATChain     = "filter-output-post-dnat"
	natPreroutingChain            = "nat-prerouting"
	natOutputChain                = "nat-output"
	natPostroutingChain           = "nat-postrouting"

	// servicesChain dispatches Service traffic through the two maps below.
	servicesChain = "services"
	// serviceIPsMap: ClusterIP . protocol . port → goto the Service port's chain.
	serviceIPsMap = "service-ips"
	// serviceNodePortsMap: protocol . nodePort → goto the Service port's external chain.
	serviceNodePortsMap = "service-nodeports"
	// nodePortIPsSet holds the node addresses that answer on NodePorts.
	nodePortIPsSet = "nodeport-ips"

	// clusterIPsSet holds every ClusterIP; clusterIPsCheckChain rejects what reaches one
	// of them without having been DNATed (a port the Service does not have).
	clusterIPsSet        = "cluster-ips"
	clusterIPsCheckChain = "cluster-ips-check"

	// Service ports without usable endpoints: their ClusterIP (and NodePort) traffic gets
	// the verdict of these maps (reject, or drop for a Local policy without local
	// endpoints), from the checks chains.
	serviceEndpointsCheckChain  = "service-endpoints-check"
	nodePortEndpointsCheckChain = "nodeport-endpoints-check"
	noEndpointServicesMap       = "no-endpoint-services"
	noEndpointNodePortsMap      = "no-endpoint-nodeports"
	rejectChain                 = "reject-chain"

	// hairpinSet holds "ip . ip" of every endpoint: DNATed traffic whose source is its
	// destination (an endpoint reaching itself through its Service) is masqueraded.
	hairpinSet = "hairpin"

	// Masquerading: rules jump to markMasqChain to mark a packet; masqueradingChain
	// (postrouting) masquerades the marked ones.
	markMasqChain     = "mark-for-masquerade"
	masqueradingChain = "masquerading"
	masqueradeMark    = "0x4000"
)

// Prefixes of the per-Service objects.
const (
	clusterChainPrefix  = "service-"
	localChainPrefix    = "local-"
	externalChainPrefix = "external-"
	endpointChainPrefix = "endpoint-"
	affinitySetPrefix   = "affinity-"
	// lbMapPrefix and dnatMapPrefix precede the name of the chain a load-balancing map
	// belongs to: a verdict map over endpoint chains (ClientIP affinity), or a map from
	// index to endpoint address for the chain's DNAT.
	lbMapPrefix   = "lb-"
	dnatMapPrefix = "dnat-"

	// prefixMax bounds the prefixes above, so that names stay within nft's limit.
	prefixMax = 16
)

// serviceChainBase is "<hash>-<namespace>/<name>/<protocol>/<port name>"; the hash keeps
// names distinct when they are cut and tells similar ones apart at a glance. The "/" is
// how the proxy recognizes per-Service chains: no fixed chain name has one.
func serviceChainBase(sp *servicePort) string {
	return hashed(sp.namespace + "/" + sp.name + "/" + strings.ToLower(string(sp.protocol)) + "/" + sp.portName)
}

// endpointChainBase is serviceChainBase's form with "__<ip>/<port>" of the endpoint.
func endpointChainBase(sp *servicePort, ep endpoint) string {
	return hashed(sp.namespace + "/" + sp.name + "/" + strings.ToLower(string(sp.protocol)) + "/" + sp.portName +
		"__" + ep.ip.String() + "/" + strconv.Itoa(int(ep.port)))
}

func hashed(name string) string {
	sum := sha256.Sum256([]byte(name))
	name = base32.StdEncoding.EncodeToString(sum[:])[:8] + "-" + name
	if max := knftables.NameLengthMax - prefixMax; len(name) > max {
		name = name[:max-3] + "..."
	}
	return name
}

// isServiceChain reports whether chain is a per-Service chain.
func isServiceChain(chain string) bool { return strings.Contains(chain, "/") }

// isLBMap reports whether m is a per-Service load-balancing map.
func isLBMap(m string) bool {
	return strings.HasPrefix(m, lbMapPrefix) || strings.HasPrefix(m, dnatMapPrefix)
}

// isAffinitySet reports whether set is a per-endpoint affinity set.
func isAffinitySet(set string) bool { return strings.HasPrefix(set, affinitySetPrefix) }

// dnatMapName is the DNAT map of the chain "<prefix>-<hash>-…": "dnat-<prefix>-<hash>".
// Short, as the kernel finds a set by comparing its name with every set's of the table.
func dnatMapName(chain string) string {
	prefix, rest, _ := strings.Cut(chain, "-")
	return dnatMapPrefix + prefix + "-" + rest[:min(8, len(rest))]
}
