package netpol

import (
	"fmt"
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Direction is the way traffic flows, seen from a selected pod.
type Direction string

const (
	// Ingress is traffic a pod receives.
	Ingress Direction = "ingress"
	// Egress is traffic a pod sends.
	Egress Direction = "egress"
)

// Inputs are the objects the desired state is computed from.
type Inputs struct {
	// NodeName is the node whose pods are protected.
	NodeName   string
	Pods       []*corev1.Pod
	Namespaces []*corev1.Namespace
	Policies   []*networkingv1.NetworkPolicy
}

// RuleKey names one ingress or egress rule of one NetworkPolicy.
type RuleKey struct {
	Namespace, Policy string
	Direction         Direction
	Index             int
}

func (k RuleKey) String() string {
	return fmt.Sprintf("%s/%s-%s-%d", k.Namespace, k.Policy, k.Direction, k.Index)
}

// Peers are the addresses one rule allows, computed from the whole cluster.
type Peers struct {
	// Any is set when the rule's from (to) is empty: every address is a peer.
	Any bool
	// Selects is set when the rule has podSelector/namespaceSelector peers; Pods holds
	// the addresses of the pods they match, sorted (possibly none yet).
	Selects bool
	Pods    []netip.Addr
	// HasBlocks is set when the rule has IPv4 ipBlock peers; Blocks holds what their
	// cidrs minus excepts cover, merged into the fewest prefixes, sorted.
	HasBlocks bool
	Blocks    []netip.Prefix
	// HasNamed is set for an egress rule with named ports; Named holds, for each
	// destination pod among the peers that has such a port, its address, protocol and
	// port number, sorted.
	HasNamed bool
	Named    []Dest
}

// Dest is one pod address with one of its container ports.
type Dest struct {
	Addr     netip.Addr
	Protocol corev1.Protocol
	Port     int32
}

// Port matches traffic by protocol and destination port.
type Port struct {
	Protocol corev1.Protocol
	// Port is the first port of the range; 0 means every port of Protocol.
	Port int32
	// EndPort is the last port of the range; 0 means the range is Port alone.
	EndPort int32
}

// Allow is one rule of a selecting policy as it applies to one pod: traffic to (from) one
// of the rule's peers on one of Ports (on any port when AnyPort) is allowed, and so is
// traffic to a Peers.Named destination when Named.
type Allow struct {
	Rule    RuleKey
	AnyPort bool
	// Ports are the rule's numeric ports, and for ingress its named ports resolved
	// against the pod's own container ports.
	Ports []Port
	// Named is set for an egress rule with named ports, which are matched per
	// destination through the rule's Peers.Named.
	Named bool
}

// Isolation is a pod selected, in one direction, by at least one policy: traffic in that
// direction is allowed when some Allow matches it.
type Isolation struct {
	Allows []Allow
}

// PodPolicy is what policy does to one pod of the node; a nil direction is not isolated.
type PodPolicy struct {
	Namespace, Name string
	Addr            netip.Addr
	Ingress, Egress *Isolation
}

// Desired is the policy model of one node.
type Desired struct {
	// Pods are the node's pods isolated in at least one direction, sorted by namespace
	// and name.
	Pods []PodPolicy
	// Peers holds the peers of every rule some Pods' Allow names.
	Peers map[RuleKey]*Peers
	// Problems name what was ignored: invalid selectors, peers, ports, duplicate pod
	// addresses. An invalid peer or port allows nothing; a policy with an invalid
	// podSelector selects nothing.
	Problems []error
}

// podInfo is a pod that can be a peer: it has an IPv4 pod address.
type podInfo struct {
	pod  *corev1.Pod
	addr netip.Addr
}

// policyInfo is a policy with its podSelector parsed.
type policyInfo struct {
	np       *networkingv1.NetworkPolicy
	selector labels.Selector
	ingress  bool
	egress   bool
}

// Compute derives the policy model of in.NodeName's pods from the cluster's pods,
// namespaces and NetworkPolicies. It does no I/O.
func Compute(in Inputs) *Desired {
	c := &computer{
		nsLabels: make(map[string]labels.Set, len(in.Namespaces)),
		d:        &Desired{Peers: map[RuleKey]*Peers{}},
	}
	for _, ns := range in.Namespaces {
		c.nsLabels[ns.Name] = namespaceLabels(ns.Name, ns.Labels)
	}
	for _, pod := range in.Pods {
		addr, ok := peerAddr(pod)
		if !ok {
			continue
		}
		c.pods = append(c.pods, podInfo{pod: pod, addr: addr})
	}
	sort.Slice(c.pods, func(i, j int) bool { return podLess(c.pods[i].pod, c.pods[j].pod) })

	policies := make([]*networkingv1.NetworkPolicy, len(in.Policies))
	copy(policies, in.Policies)
	sort.Slice(policies, func(i, j int) bool {
		if policies[i].Namespace != policies[j].Namespace {
			return policies[i].Namespace < policies[j].Namespace
		}
		return policies[i].Name < policies[j].Name
	})
	byNamespace := map[string][]policyInfo{}
	for _, np := range policies {
		sel, err := c.selector(np.Spec.PodSelector.DeepCopy())
		if err != nil {
			c.problem(np, field.Invalid(field.NewPath("spec", "podSelector"), np.Spec.PodSelector.String(), err.Error()))
			continue
		}
		ingress, egress := policyTypes(np)
		byNamespace[np.Namespace] = append(byNamespace[np.Namespace], policyInfo{np: np, selector: sel, ingress: ingress, egress: egress})
	}

	seen := map[netip.Addr]string{}
	for _, p := range c.pods {
		if p.pod.Spec.NodeName != in.NodeName {
			continue
		}
		pp := PodPolicy{Namespace: p.pod.Namespace, Name: p.pod.Name, Addr: p.addr}
		for _, pi := range byNamespace[p.pod.Namespace] {
			if !pi.selector.Matches(labels.Set(p.pod.Labels)) {
				continue
			}
			if pi.ingress {
				pp.Ingress = c.isolate(pp.Ingress, pi.np, Ingress, p.pod)
			}
			if pi.egress {
				pp.Egress = c.isolate(pp.Egress, pi.np, Egress, p.pod)
			}
		}
		if pp.Ingress == nil && pp.Egress == nil {
			continue
		}
		if other, dup := seen[p.addr]; dup {
			c.d.Problems = append(c.d.Problems, fmt.Errorf("pod %s/%s: address %s is also pod %s's; only %s is protected",
				p.pod.Namespace, p.pod.Name, p.addr, other, other))
			continue
		}
		seen[p.addr] = p.pod.Namespace + "/" + p.pod.Name
		c.d.Pods = append(c.d.Pods, pp)
	}
	return c.d
}

type computer struct {
	pods     []podInfo
	nsLabels map[string]labels.Set
	d        *Desired
}

func (c *computer) problem(np *networkingv1.NetworkPolicy, err error) {
	c.d.Problems = append(c.d.Problems, fmt.Errorf("networkpolicy %s/%s: %w", np.Namespace, np.Name, err))
}

// selector converts s; nil selects nothing, {} everything.
func (c *computer) selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Nothing(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// isolate adds to iso (nil: not yet isolated) the rules in direction dir of np, as they
// apply to pod.
func (c *computer) isolate(iso *Isolation, np *networkingv1.NetworkPolicy, dir Direction, pod *corev1.Pod) *Isolation {
	if iso == nil {
		iso = &Isolation{}
	}
	var n int
	if dir == Ingress {
		n = len(np.Spec.Ingress)
	} else {
		n = len(np.Spec.Egress)
	}
	for i := 0; i < n; i++ {
		key := RuleKey{Namespace: np.Namespace, Policy: np.Name, Direction: dir, Index: i}
		var ports []networkingv1.NetworkPolicyPort
		var peers []networkingv1.NetworkPolicyPeer
		path := field.NewPath("spec", string(dir)).Index(i)
		peersField := "from"
		if dir == Ingress {
			ports, peers = np.Spec.Ingress[i].Ports, np.Spec.Ingress[i].From
		} else {
			ports, peers, peersField = np.Spec.Egress[i].Ports, np.Spec.Egress[i].To, "to"
		}
		allow := Allow{Rule: key, AnyPort: len(ports) == 0}
		var named []namedPort
		for j := range ports {
			pp, name, err := parsePort(ports[j], path.Child("ports").Index(j))
			if err != nil {
				if c.peers(key) == nil { // report once per rule, not once per selected pod
					c.problem(np, err)
				}
				continue
			}
			switch {
			case name == "":
				allow.Ports = append(allow.Ports, pp)
			case dir == Ingress:
				if num, ok := containerPort(pod, name, pp.Protocol); ok {
					allow.Ports = append(allow.Ports, Port{Protocol: pp.Protocol, Port: num})
				}
			default:
				named = append(named, namedPort{name: name, protocol: pp.Protocol})
				allow.Named = true
			}
		}
		if c.peers(key) == nil {
			c.d.Peers[key] = c.computePeers(np, peers, named, path, peersField)
		}
		if allow.AnyPort || len(allow.Ports) > 0 || allow.Named {
			iso.Allows = append(iso.Allows, allow)
		}
	}
	return iso
}

func (c *computer) peers(key RuleKey) *Peers { return c.d.Peers[key] }

type namedPort struct {
	name     string
	protocol corev1.Protocol
}

// computePeers finds the addresses a rule's peers cover.
func (c *computer) computePeers(np *networkingv1.NetworkPolicy, peers []networkingv1.NetworkPolicyPeer, named []namedPort, path *field.Path, peersField string) *Peers {
	out := &Peers{Any: len(peers) == 0, HasNamed: len(named) > 0}
	var ranges []ipRange
	selected := map[netip.Addr]bool{}
	var selectedPods []podInfo
	for j, peer := range peers {
		ppath := path.Child(peersField).Index(j)
		if peer.IPBlock != nil {
			if peer.PodSelector != nil || peer.NamespaceSelector != nil {
				c.problem(np, field.Forbidden(ppath, "may not specify both ipBlock and another peer"))
				continue
			}
			r, v4, err := blockRanges(peer.IPBlock, ppath.Child("ipBlock"))
			if err != nil {
				c.problem(np, err)
				continue
			}
			if v4 {
				out.HasBlocks = true
				ranges = append(ranges, r...)
			}
			continue
		}
		if peer.PodSelector == nil && peer.NamespaceSelector == nil {
			c.problem(np, field.Required(ppath, "must specify a peer"))
			continue
		}
		podSel := labels.Everything()
		if peer.PodSelector != nil {
			s, err := c.selector(peer.PodSelector)
			if err != nil {
				c.problem(np, field.Invalid(ppath.Child("podSelector"), peer.PodSelector.String(), err.Error()))
				continue
			}
			podSel = s
		}
		var nsSel labels.Selector
		if peer.NamespaceSelector != nil {
			s, err := c.selector(peer.NamespaceSelector)
			if err != nil {
				c.problem(np, field.Invalid(ppath.Child("namespaceSelector"), peer.NamespaceSelector.String(), err.Error()))
				continue
			}
			nsSel = s
		}
		out.Selects = true
		nsOK := map[string]bool{}
		for _, p := range c.pods {
			if nsSel == nil {
				if p.pod.Namespace != np.Namespace {
					continue
				}
			} else {
				ok, known := nsOK[p.pod.Namespace]
				if !known {
					ok = nsSel.Matches(c.namespace(p.pod.Namespace))
					nsOK[p.pod.Namespace] = ok
				}
				if !ok {
					continue
				}
			}
			if !podSel.Matches(labels.Set(p.pod.Labels)) || selected[p.addr] {
				continue
			}
			selected[p.addr] = true
			selectedPods = append(selectedPods, p)
		}
	}
	merged := mergeRanges(ranges)
	if out.HasBlocks {
		out.Blocks = rangesPrefixes(merged)
	}
	for _, p := range selectedPods {
		out.Pods = append(out.Pods, p.addr)
	}
	sort.Slice(out.Pods, func(i, j int) bool { return out.Pods[i].Less(out.Pods[j]) })
	out.Pods = compactAddrs(out.Pods)
	if out.HasNamed {
		for _, p := range c.pods {
			if !out.Any && !selected[p.addr] && !rangesContain(merged, p.addr) {
				continue
			}
			for _, n := range named {
				if num, ok := containerPort(p.pod, n.name, n.protocol); ok {
					out.Named = append(out.Named, Dest{Addr: p.addr, Protocol: n.protocol, Port: num})
				}
			}
		}
		sort.Slice(out.Named, func(i, j int) bool { return destLess(out.Named[i], out.Named[j]) })
		out.Named = compactDests(out.Named)
	}
	return out
}

// namespace is the label set of namespace ns (only its name label when it is unknown).
func (c *computer) namespace(ns string) labels.Set {
	if set, ok := c.nsLabels[ns]; ok {
		return set
	}
	return namespaceLabels(ns, nil)
}

// namespaceLabels are a namespace's labels plus kubernetes.io/metadata.name, which every
// namespace carries.
func namespaceLabels(name string, l map[string]string) labels.Set {
	out := make(labels.Set, len(l)+1)
	for k, v := range l {
		out[k] = v
	}
	out[corev1.LabelMetadataName] = name
	return out
}

// policyTypes are the directions np isolates: its policyTypes, or when empty Ingress, and
// Egress when it has egress rules.
func policyTypes(np *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(np.Spec.PolicyTypes) == 0 {
		return true, len(np.Spec.Egress) > 0
	}
	for _, t := range np.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			ingress = true
		case networkingv1.PolicyTypeEgress:
			egress = true
		}
	}
	return ingress, egress
}

// parsePort checks one NetworkPolicyPort; a named port comes back as its name.
func parsePort(p networkingv1.NetworkPolicyPort, path *field.Path) (Port, string, error) {
	proto := corev1.ProtocolTCP
	if p.Protocol != nil {
		proto = *p.Protocol
	}
	switch proto {
	case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
	default:
		return Port{}, "", field.NotSupported(path.Child("protocol"), proto, []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP})
	}
	out := Port{Protocol: proto}
	if p.Port == nil {
		if p.EndPort != nil {
			return Port{}, "", field.Forbidden(path.Child("endPort"), "may not be specified when port is not specified")
		}
		return out, "", nil
	}
	if p.Port.Type == intstr.String {
		if p.EndPort != nil {
			return Port{}, "", field.Forbidden(path.Child("endPort"), "may not be specified when port is a named port")
		}
		if p.Port.StrVal == "" {
			return Port{}, "", field.Invalid(path.Child("port"), p.Port.StrVal, "must be a port number or a port name")
		}
		return out, p.Port.StrVal, nil
	}
	out.Port = p.Port.IntVal
	if out.Port < 1 || out.Port > 65535 {
		return Port{}, "", field.Invalid(path.Child("port"), out.Port, "must be between 1 and 65535, inclusive")
	}
	if p.EndPort != nil && *p.EndPort != out.Port {
		if *p.EndPort < out.Port || *p.EndPort > 65535 {
			return Port{}, "", field.Invalid(path.Child("endPort"), *p.EndPort, "must be between port and 65535, inclusive")
		}
		out.EndPort = *p.EndPort
	}
	return out, "", nil
}

// containerPort resolves a named port against pod's containers (and sidecar init
// containers).
func containerPort(pod *corev1.Pod, name string, proto corev1.Protocol) (int32, bool) {
	find := func(cs []corev1.Container, sidecarsOnly bool) (int32, bool) {
		for _, ctr := range cs {
			if sidecarsOnly && (ctr.RestartPolicy == nil || *ctr.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
				continue
			}
			for _, cp := range ctr.Ports {
				p := cp.Protocol
				if p == "" {
					p = corev1.ProtocolTCP
				}
				if cp.Name == name && p == proto && cp.ContainerPort > 0 {
					return cp.ContainerPort, true
				}
			}
		}
		return 0, false
	}
	if n, ok := find(pod.Spec.Containers, false); ok {
		return n, true
	}
	return find(pod.Spec.InitContainers, true)
}

// peerAddr is pod's IPv4 address when the pod can take part in policy: running or
// pending with an address, not on the host network.
func peerAddr(pod *corev1.Pod) (netip.Addr, bool) {
	if pod.Spec.HostNetwork || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return netip.Addr{}, false
	}
	ips := []string{pod.Status.PodIP}
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
			return a, true
		}
	}
	return netip.Addr{}, false
}

func podLess(a, b *corev1.Pod) bool {
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

func destLess(a, b Dest) bool {
	if a.Addr != b.Addr {
		return a.Addr.Less(b.Addr)
	}
	if a.Protocol != b.Protocol {
		return a.Protocol < b.Protocol
	}
	return a.Port < b.Port
}

func compactAddrs(s []netip.Addr) []netip.Addr {
	out := s[:0]
	for i, a := range s {
		if i == 0 || a != s[i-1] {
			out = append(out, a)
		}
	}
	return out
}

func compactDests(s []Dest) []Dest {
	out := s[:0]
	for i, d := range s {
		if i == 0 || d != s[i-1] {
			out = append(out, d)
		}
	}
	return out
}
