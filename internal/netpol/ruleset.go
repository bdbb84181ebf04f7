package netpol

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Names of the table's fixed objects.
const (
	forwardChain   = "forward"
	ingressPodsMap = "ingress-pods"
	egressPodsMap  = "egress-pods"
)

// Set types of the peer sets.
const (
	addrType  = "ipv4_addr"
	namedType = "ipv4_addr . inet_proto . inet_service"
	mapType   = "ipv4_addr : verdict"
)

// forwardRules are the rules of the base chain: replies first, then the sender's egress
// chain, then the receiver's ingress chain; whatever returns from both is accepted by the
// chain's policy.
var forwardRules = []string{
	"ct state established,related accept",
	"ip saddr vmap @" + egressPodsMap,
	"ip daddr vmap @" + ingressPodsMap,
}

// Ruleset is the content of the table beyond its fixed objects (base chain and maps).
type Ruleset struct {
	// Chains are the per-pod chains and their rules, in order.
	Chains map[string][]string
	// Sets are the peer sets.
	Sets map[string]*Set
	// Ingress and Egress map a pod address to the chain that filters its traffic (the
	// elements of the maps ingress-pods and egress-pods).
	Ingress, Egress map[string]string
}

// Set is one named set of the table.
type Set struct {
	Type     string
	Interval bool
	// Elements are keys (one string per field of the type), sorted.
	Elements [][]string
}

// Render turns the policy model into the table's content. It does no I/O.
func Render(d *Desired) *Ruleset {
	rs := &Ruleset{
		Chains:  map[string][]string{},
		Sets:    map[string]*Set{},
		Ingress: map[string]string{},
		Egress:  map[string]string{},
	}
	used := map[RuleKey]bool{}
	for _, pp := range d.Pods {
		for _, dir := range []Direction{Ingress, Egress} {
			iso := pp.Ingress
			if dir == Egress {
				iso = pp.Egress
			}
			if iso == nil {
				continue
			}
			chain := chainName(dir, pp.Namespace, pp.Name)
			// A pod reaching itself (through a Service address DNAT'd back to it) is
			// not subject to its own policies.
			self := "ip saddr " + pp.Addr.String() + " return"
			if dir == Egress {
				self = "ip daddr " + pp.Addr.String() + " return"
			}
			rules := []string{self}
			for _, a := range iso.Allows {
				used[a.Rule] = true
				rules = append(rules, allowRules(dir, a, d.Peers[a.Rule])...)
			}
			rules = append(rules, "drop")
			rs.Chains[chain] = rules
			if dir == Ingress {
				rs.Ingress[pp.Addr.String()] = chain
			} else {
				rs.Egress[pp.Addr.String()] = chain
			}
		}
	}
	for key := range used {
		p := d.Peers[key]
		if p == nil || p.Any && !p.HasNamed {
			continue
		}
		if !p.Any && p.Selects {
			s := &Set{Type: addrType}
			for _, a := range p.Pods {
				s.Elements = append(s.Elements, []string{a.String()})
			}
			rs.Sets[setName("peers", key)] = s
		}
		if !p.Any && p.HasBlocks {
			s := &Set{Type: addrType, Interval: true}
			for _, b := range p.Blocks {
				s.Elements = append(s.Elements, []string{b.String()})
			}
			rs.Sets[setName("blocks", key)] = s
		}
		if p.HasNamed {
			s := &Set{Type: namedType}
			for _, n := range p.Named {
				s.Elements = append(s.Elements, []string{n.Addr.String(), protoName(n.Protocol), strconv.Itoa(int(n.Port))})
			}
			rs.Sets[setName("named", key)] = s
		}
	}
	return rs
}

// allowRules are the rules that return (allow) the traffic a matches.
func allowRules(dir Direction, a Allow, p *Peers) []string {
	if p == nil {
		return nil
	}
	addr := "ip saddr"
	if dir == Egress {
		addr = "ip daddr"
	}
	var peerMatches []string
	switch {
	case p.Any:
		peerMatches = []string{""}
	default:
		if p.Selects {
			peerMatches = append(peerMatches, addr+" @"+setName("peers", a.Rule))
		}
		if p.HasBlocks {
			peerMatches = append(peerMatches, addr+" @"+setName("blocks", a.Rule))
		}
	}
	var portMatches []string
	if a.AnyPort {
		portMatches = []string{""}
	}
	for _, pt := range a.Ports {
		portMatches = append(portMatches, portMatch(pt))
	}
	var out []string
	for _, pm := range peerMatches {
		for _, po := range portMatches {
			out = append(out, joinMatch(pm, po, "return"))
		}
	}
	if a.Named && dir == Egress {
		out = append(out, "ip daddr . meta l4proto . th dport @"+setName("named", a.Rule)+" return")
	}
	return out
}

func portMatch(p Port) string {
	m := "meta l4proto " + protoName(p.Protocol)
	switch {
	case p.Port == 0:
		return m
	case p.EndPort > p.Port:
		return fmt.Sprintf("%s th dport %d-%d", m, p.Port, p.EndPort)
	default:
		return fmt.Sprintf("%s th dport %d", m, p.Port)
	}
}

func protoName(p corev1.Protocol) string { return strings.ToLower(string(p)) }

func joinMatch(parts ...string) string {
	var s []string
	for _, p := range parts {
		if p != "" {
			s = append(s, p)
		}
	}
	return strings.Join(s, " ")
}

// maxName keeps object names well inside nft's limit of 255 bytes.
const maxName = 200

// chainName is the chain filtering one pod's traffic in direction dir.
func chainName(dir Direction, namespace, pod string) string {
	return objName(string(dir), namespace+"/"+pod)
}

// setName is the set of one kind (peers, blocks, named) of rule key.
func setName(kind string, key RuleKey) string {
	return objName(kind, fmt.Sprintf("%s/%s-%s-%d", key.Namespace, key.Policy, key.Direction, key.Index))
}

// objName is prefix-key when that is a short nft identifier made of characters object
// names may hold, and otherwise prefix, a hash of key and the start of key.
func objName(prefix, key string) string {
	name := prefix + "-" + key
	if len(name) <= maxName && validName(name) {
		return name
	}
	sum := sha256.Sum256([]byte(key))
	hash := strings.ToLower(base32.StdEncoding.EncodeToString(sum[:]))[:16]
	var b strings.Builder
	b.WriteString(prefix + "-" + hash)
	for _, r := range key {
		if b.Len() >= maxName {
			break
		}
		if r < 0x80 && identChar(byte(r)) {
			if b.Len() == len(prefix)+1+len(hash) {
				b.WriteByte('-')
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}

// validName reports whether s is an nft identifier: a letter, then letters, digits and
// '/', '-', '_', '.'.
func validName(s string) bool {
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !identChar(s[i]) {
			return false
		}
	}
	return true
}

func identChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '/' || c == '-' || c == '_' || c == '.'
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
