package cloudprovider

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// LabelExcludeFromLB keeps a node out of every load balancer's targets.
const LabelExcludeFromLB = "node.kubernetes.io/exclude-from-external-load-balancers"

// EligibleNode is whether n is a target of instance-type load balancers: Ready, not
// excluded by label, not being deleted, and with an instance.
func EligibleNode(n *corev1.Node) bool {
	if _, excluded := n.Labels[LabelExcludeFromLB]; excluded || n.DeletionTimestamp != nil {
		return false
	}
	if _, err := ParseProviderID(n.Spec.ProviderID); err != nil {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// InstanceTargets are the eligible nodes' instances at port, sorted.
func InstanceTargets(nodes []*corev1.Node, port int32) []Target {
	var ids []string
	for _, n := range nodes {
		if EligibleNode(n) {
			id, _ := ParseProviderID(n.Spec.ProviderID)
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var out []Target
	for _, id := range slices.Compact(ids) {
		out = append(out, Target{ID: id, Port: port})
	}
	return out
}

// EndpointTargets are the ready IPv4 addresses of the Service port p in slices, each at
// the port the endpoints give p, sorted.
func EndpointTargets(p corev1.ServicePort, eps []*discoveryv1.EndpointSlice) []Target {
	var out []Target
	for _, s := range eps {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		port := int32(0)
		for _, sp := range s.Ports {
			proto := corev1.ProtocolTCP
			if sp.Protocol != nil {
				proto = *sp.Protocol
			}
			name := ""
			if sp.Name != nil {
				name = *sp.Name
			}
			if sp.Port != nil && name == p.Name && proto == p.Protocol {
				port = *sp.Port
			}
		}
		if port == 0 {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				if t := (Target{ID: a, Port: port}); !slices.Contains(out, t) {
					out = append(out, t)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b Target) int {
		return strings.Compare(a.ID+":"+strconv.Itoa(int(a.Port)), b.ID+":"+strconv.Itoa(int(b.Port)))
	})
	return out
}
