package proxy

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

// syncer writes ServiceStates into one nft table, each sync one transaction. It remembers
// what it wrote (applied), so that a partial sync rewrites only the chains that changed
// and touches only the elements of the Services given to it. Not safe for concurrent use.
type syncer struct {
	nft     knftables.Interface
	nodeIPs []string
	// clusterCIDR is the pods' range: traffic to a ClusterIP from outside it is
	// masqueraded, so that the endpoint's reply comes back through this node.
	clusterCIDR string
	log         *slog.Logger

	// applied is the state of each Service as the table holds it.
	applied map[types.NamespacedName]*ServiceState
	// owners tells which Service an element of the shared maps and sets belongs to;
	// sharers which Services need a Shared element.
	owners  map[string]types.NamespacedName
	sharers map[string]map[types.NamespacedName]bool
	// needFull: the next sync must be full (at start, after a failed transaction).
	needFull bool
	// joinElements: write the elements of a set in one command (elementBatch); off for
	// fakes, whose dumps then list elements one by one.
	joinElements bool
	// baseRecreated: the base chains were deleted and made again once by this process, so
	// that a change of their hook or priority since an older run takes effect.
	baseRecreated bool
}

func newSyncer(nft knftables.Interface, nodeIPs []string, clusterCIDR string, log *slog.Logger) *syncer {
	return &syncer{
		nft:         nft,
		nodeIPs:     nodeIPs,
		clusterCIDR: clusterCIDR,
		log:         log,
		applied:     map[types.NamespacedName]*ServiceState{},
		owners:      map[string]types.NamespacedName{},
		sharers:     map[string]map[types.NamespacedName]bool{},
		needFull:    true,
	}
}

// syncStats describe one sync.
type syncStats struct {
	services   int // Services written (all of them in a full sync)
	operations int // operations of the transaction
}

// fullSync makes the table hold exactly desired (every Service's state by name): the fixed
// objects made again, the shared maps and sets flushed and filled, every Service chain
// rewritten, and chains and affinity sets that no Service needs (left by an earlier run, or
// by a Service deleted while the proxy was down) removed.
func (s *syncer) fullSync(ctx context.Context, desired map[types.NamespacedName]*ServiceState) (syncStats, error) {
	// The table's chains, sets and maps, to find what no Service needs any more. A table
	// without chains is one this proxy has not written yet (listing its sets would fail).
	existingChains, err := s.list(ctx, "chains")
	if err != nil {
		return syncStats{}, s.failed(err)
	}
	var existingSets, existingMaps []string
	if len(existingChains) > 0 {
		if existingSets, err = s.list(ctx, "sets"); err != nil {
			return syncStats{}, s.failed(err)
		}
		if existingMaps, err = s.list(ctx, "maps"); err != nil {
			return syncStats{}, s.failed(err)
		}
	}

	tx := s.nft.NewTransaction()
	s.writeBase(tx)

	keys := sortedNames(desired)
	owners := map[string]types.NamespacedName{}
	haveChains := setOf(existingChains)
	haveMaps := setOf(existingMaps)
	wantChains := map[string]bool{}
	wantSets := map[string]bool{}
	wantMaps := map[string]bool{}
	// A chain or map the table has is flushed, one it lacks is added (one command each).
	for _, k := range keys {
		st := desired[k]
		for _, c := range st.Chains {
			wantChains[c.Name] = true
			if haveChains[c.Name] {
				tx.Flush(&knftables.Chain{Name: c.Name})
			} else {
				tx.Add(&knftables.Chain{Name: c.Name})
			}
		}
		for _, m := range st.Maps {
			wantMaps[m.Name] = true
			if haveMaps[m.Name] {
				tx.Flush(&knftables.Map{Name: m.Name})
			} else {
				tx.Add(lbMapObject(m))
			}
		}
		for _, set := range st.Sets {
			wantSets[set.Name] = true
			tx.Add(affinitySetObject(set))
		}
	}
	var staleChains, staleMaps []string
	for _, c := range existingChains {
		if isServiceChain(c) && !wantChains[c] {
			staleChains = append(staleChains, c)
			tx.Flush(&knftables.Chain{Name: c})
		}
	}
	for _, m := range existingMaps {
		if isLBMap(m) && !wantMaps[m] {
			staleMaps = append(staleMaps, m)
			tx.Flush(&knftables.Map{Name: m})
		}
	}
	adds := s.elements()
	for _, k := range keys {
		for _, c := range desired[k].Chains {
			addRules(tx, c)
		}
		for _, m := range desired[k].Maps {
			addLBElements(adds, m)
		}
	}
	adds.write(tx, (*knftables.Transaction).Add)
	sharers := map[string]map[types.NamespacedName]bool{}
	for _, k := range keys {
		for i := range desired[k].Elements {
			e := &desired[k].Elements[i]
			if e.Shared {
				if sharers[e.id()] == nil {
					sharers[e.id()] = map[types.NamespacedName]bool{}
					adds.add(elementObject(e))
				}
				sharers[e.id()][k] = true
				continue
			}
			if owner, taken := owners[e.id()]; taken {
				s.log.Warn("element claimed by two Services; the first keeps it", "element", e.id(), "service", k, "owner", owner)
				continue
			}
			owners[e.id()] = k
			adds.add(elementObject(e))
		}
	}
	adds.write(tx, (*knftables.Transaction).Add)
	for _, m := range staleMaps {
		tx.Delete(&knftables.Map{Name: m})
	}
	for _, c := range staleChains {
		tx.Delete(&knftables.Chain{Name: c})
	}
	for _, set := range existingSets {
		if isAffinitySet(set) && !wantSets[set] {
			tx.Delete(&knftables.Set{Name: set})
		}
	}

	stats := syncStats{services: len(desired), operations: tx.NumOperations()}
	if err := s.nft.Run(ctx, tx); err != nil {
		return stats, s.failed(fmt.Errorf("full sync of %d services: %w", len(desired), err))
	}
	s.applied = maps.Clone(desired)
	s.owners = owners
	s.sharers = sharers
	s.needFull = false
	s.baseRecreated = true
	return stats, nil
}

// partialSync brings the Services in changes (nil state: the Service is gone) from their
// applied state to the given one and leaves everything else alone: elements that
// disappeared or changed are deleted, chains that are new or whose rules changed are
// (re)written, chains and affinity sets no longer needed are deleted, new elements added.
func (s *syncer) partialSync(ctx context.Context, changes map[types.NamespacedName]*ServiceState) (syncStats, error) {
	var (
		elemDeletes, elemAdds []*knftables.Element
		setAdds               []AffinitySet
		setDeletes            []string
		chains                objectDiff[Chain]
		lbMaps                objectDiff[LBMap]
		shared                = map[string]*sharedChange{}
		released              = map[string]bool{}
		claimed               = map[string]types.NamespacedName{}
		written               = map[types.NamespacedName]bool{}
	)
	keys := sortedNames(changes)
	state := func(m map[types.NamespacedName]*ServiceState, k types.NamespacedName) *ServiceState {
		if st := m[k]; st != nil {
			return st
		}
		return &ServiceState{}
	}

	// First what goes away, so that an element another Service gives up in this sync can
	// be claimed by the next one whatever their order.
	for _, k := range keys {
		old, cur := state(s.applied, k), state(changes, k)
		curElements := elementsByID(cur)
		for i := range old.Elements {
			e := &old.Elements[i]
			id := e.id()
			if e.Shared {
				if _, ok := curElements[id]; !ok {
					s.sharedChange(shared, e).drop[k] = true
				}
				continue
			}
			if n, ok := curElements[id]; ok && n.Value == e.Value {
				continue
			}
			if s.owners[id] != k {
				continue // never written for this Service
			}
			elemDeletes = append(elemDeletes, &knftables.Element{Set: e.Set, Map: e.Map, Key: e.Key})
			released[id] = true
			written[k] = true
		}
	}
	for _, k := range keys {
		old, cur := state(s.applied, k), state(changes, k)

		oldElements := elementsByID(old)
		for i := range cur.Elements {
			n := &cur.Elements[i]
			id := n.id()
			if n.Shared {
				if _, ok := oldElements[id]; !ok {
					s.sharedChange(shared, n).take[k] = true
				}
				continue
			}
			if o, ok := oldElements[id]; ok && o.Value == n.Value && s.owners[id] == k {
				continue
			}
			owner, taken := claimed[id]
			if !taken && !released[id] {
				owner, taken = s.owners[id]
			}
			if taken && owner != k {
				s.log.Warn("element claimed by two Services; the first keeps it", "element", id, "service", k, "owner", owner)
				continue
			}
			claimed[id] = k
			elemAdds = append(elemAdds, elementObject(n))
			written[k] = true
		}

		chainName := func(c Chain) string { return c.Name }
		chainRules := func(c Chain) []string { return c.Rules }
		if chains.diff(old.Chains, cur.Chains, chainName, chainRules) {
			written[k] = true
		}
		mapName := func(m LBMap) string { return m.Name }
		mapVerdicts := func(m LBMap) []string { return m.Values }
		if lbMaps.diff(old.Maps, cur.Maps, mapName, mapVerdicts) {
			written[k] = true
		}

		oldSets := make(map[string]AffinitySet, len(old.Sets))
		for _, set := range old.Sets {
			oldSets[set.Name] = set
		}
		curSets := make(map[string]bool, len(cur.Sets))
		for _, set := range cur.Sets {
			curSets[set.Name] = true
			if oldSets[set.Name] != set {
				setAdds = append(setAdds, set)
				written[k] = true
			}
		}
		for _, set := range old.Sets {
			if !curSets[set.Name] {
				setDeletes = append(setDeletes, set.Name)
				written[k] = true
			}
		}
	}

	// A shared element is added when a first Service needs it and deleted when the last
	// one stops needing it.
	for _, id := range slices.Sorted(maps.Keys(shared)) {
		c := shared[id]
		now := maps.Clone(s.sharers[id])
		if now == nil {
			now = map[types.NamespacedName]bool{}
		}
		had := len(now) > 0
		for k := range c.drop {
			delete(now, k)
		}
		maps.Copy(now, c.take)
		switch {
		case had && len(now) == 0:
			elemDeletes = append(elemDeletes, &knftables.Element{Set: c.element.Set, Map: c.element.Map, Key: c.element.Key})
		case !had && len(now) > 0:
			elemAdds = append(elemAdds, elementObject(c.element))
		}
		c.after = now
		for k := range c.drop {
			written[k] = true
		}
		for k := range c.take {
			written[k] = true
		}
	}

	// The order keeps every reference valid at each step: elements pointing at chains go
	// first, chains and maps are emptied before what their rules and elements use is
	// deleted, chains, maps and sets exist before rules and elements use them, and
	// chains are deleted last.
	tx := s.nft.NewTransaction()
	deletes := s.elements()
	for _, e := range elemDeletes {
		deletes.add(e)
	}
	deletes.write(tx, (*knftables.Transaction).Delete)
	for _, c := range chains.adds {
		tx.Add(&knftables.Chain{Name: c})
		tx.Flush(&knftables.Chain{Name: c})
	}
	for _, c := range chains.flushes {
		tx.Flush(&knftables.Chain{Name: c})
	}
	newMaps := make(map[string]LBMap, len(lbMaps.writes))
	for _, m := range lbMaps.writes {
		newMaps[m.Name] = m
	}
	for _, m := range lbMaps.adds {
		tx.Add(lbMapObject(newMaps[m]))
		tx.Flush(&knftables.Map{Name: m})
	}
	for _, m := range lbMaps.flushes {
		tx.Flush(&knftables.Map{Name: m})
	}
	for _, set := range setAdds {
		tx.Add(affinitySetObject(set))
	}
	for _, c := range chains.writes {
		addRules(tx, c)
	}
	adds := s.elements()
	for _, m := range lbMaps.writes {
		addLBElements(adds, m)
	}
	for _, e := range elemAdds {
		adds.add(e)
	}
	adds.write(tx, (*knftables.Transaction).Add)
	for _, m := range lbMaps.deletes {
		tx.Delete(&knftables.Map{Name: m})
	}
	for _, c := range chains.deletes {
		tx.Delete(&knftables.Chain{Name: c})
	}
	for _, set := range setDeletes {
		tx.Delete(&knftables.Set{Name: set})
	}

	stats := syncStats{services: len(written), operations: tx.NumOperations()}
	if tx.NumOperations() > 0 {
		if err := s.nft.Run(ctx, tx); err != nil {
			return stats, s.failed(fmt.Errorf("sync of %d services: %w", len(written), err))
		}
	}
	for id := range released {
		delete(s.owners, id)
	}
	for id, c := range shared {
		if len(c.after) == 0 {
			delete(s.sharers, id)
		} else {
			s.sharers[id] = c.after
		}
	}
	maps.Copy(s.owners, claimed)
	for _, k := range keys {
		if changes[k] == nil {
			delete(s.applied, k)
		} else {
			s.applied[k] = changes[k]
		}
	}
	return stats, nil
}

// failed makes the next sync a full one and returns err.
func (s *syncer) failed(err error) error {
	s.needFull = true
	return err
}

// list names the table's objects of a type; none when the table does not exist yet.
func (s *syncer) list(ctx context.Context, what string) ([]string, error) {
	names, err := s.nft.List(ctx, what)
	if err != nil && !knftables.IsNotFound(err) {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	return names, nil
}

// writeBase adds to tx the table and its fixed objects, made again from scratch (chains
// flushed and refilled) and with the shared maps and sets emptied.
func (s *syncer) writeBase(tx *knftables.Transaction) {
	tx.Add(&knftables.Table{Comment: ptr.To("rules of kubelab's service proxy")})

	type baseChain struct {
		name     string
		typ      knftables.BaseChainType
		hook     knftables.BaseChainHook
		priority knftables.BaseChainPriority
	}
	// The filter chains around DNAT: before it they see the Service address, after it
	// what was not DNATed. Rejecting at prerouting (kernel 5.9 and later) works before
	// the routing decision, so it needs no route for the Service range in the node.
	bases := []baseChain{
		{filterPreroutingChain, knftables.FilterType, knftables.PreroutingHook, knftables.DNATPriority + "-10"},
		{filterInputChain, knftables.FilterType, knftables.InputHook, knftables.DNATPriority + "-10"},
		{filterOutputChain, knftables.FilterType, knftables.OutputHook, knftables.DNATPriority + "-10"},
		{filterPreroutingPostDNATChain, knftables.FilterType, knftables.PreroutingHook, knftables.DNATPriority + "+10"},
		{filterOutputPostDNATChain, knftables.FilterType, knftables.OutputHook, knftables.DNATPriority + "+10"},
		{natPreroutingChain, knftables.NATType, knftables.PreroutingHook, knftables.DNATPriority},
		{natOutputChain, knftables.NATType, knftables.OutputHook, knftables.DNATPriority},
		{natPostroutingChain, knftables.NATType, knftables.PostroutingHook, knftables.SNATPriority},
	}
	if !s.baseRecreated {
		for _, b := range bases {
			tx.Add(&knftables.Chain{Name: b.name})
			tx.Delete(&knftables.Chain{Name: b.name})
		}
	}
	for _, b := range bases {
		c := &knftables.Chain{Name: b.name, Type: ptr.To(b.typ), Hook: ptr.To(b.hook), Priority: ptr.To(b.priority)}
		tx.Add(c)
		tx.Flush(c)
	}
	for _, c := range []string{servicesChain, masqueradingChain, markMasqChain, serviceEndpointsCheckChain,
		nodePortEndpointsCheckChain, clusterIPsCheckChain, rejectChain} {
		tx.Add(&knftables.Chain{Name: c})
		tx.Flush(&knftables.Chain{Name: c})
	}
	jumps := []struct{ from, extra, to string }{
		{filterPreroutingChain, "ct state new", serviceEndpointsCheckChain},
		{filterOutputChain, "ct state new", serviceEndpointsCheckChain},
		{filterInputChain, "ct state new", nodePortEndpointsCheckChain},
		{filterPreroutingPostDNATChain, "ct state new", clusterIPsCheckChain},
		{filterOutputPostDNATChain, "ct state new", clusterIPsCheckChain},
		{natPreroutingChain, "", servicesChain},
		{natOutputChain, "", servicesChain},
		{natPostroutingChain, "", masqueradingChain},
	}
	for _, j := range jumps {
		tx.Add(&knftables.Rule{Chain: j.from, Rule: knftables.Concat(j.extra, "jump", j.to)})
	}

	tx.Add(&knftables.Rule{Chain: markMasqChain, Rule: "mark set mark or " + masqueradeMark})
	tx.Add(&knftables.Set{Name: hairpinSet, Type: "ipv4_addr . ipv4_addr",
		Comment: ptr.To("endpoint address . endpoint address")})
	tx.Add(&knftables.Rule{Chain: masqueradingChain, Rule: "ct status dnat ip saddr . ip daddr @" + hairpinSet +
		" jump " + markMasqChain, Comment: ptr.To("an endpoint reaching itself through its Service")})
	tx.Add(&knftables.Rule{Chain: masqueradingChain, Rule: "mark and " + masqueradeMark + " == 0 return"})
	tx.Add(&knftables.Rule{Chain: masqueradingChain, Rule: "mark set mark xor " + masqueradeMark})
	tx.Add(&knftables.Rule{Chain: masqueradingChain, Rule: "masquerade fully-random"})

	tx.Add(&knftables.Rule{Chain: rejectChain, Rule: "meta l4proto tcp reject with tcp reset"})
	tx.Add(&knftables.Rule{Chain: rejectChain, Rule: "reject"})

	tx.Add(&knftables.Set{Name: clusterIPsSet, Type: "ipv4_addr", Comment: ptr.To("ClusterIPs")})
	tx.Add(&knftables.Rule{Chain: clusterIPsCheckChain, Rule: "ip daddr @" + clusterIPsSet + " reject",
		Comment: ptr.To("reject traffic to ports a ClusterIP does not have")})

	// NodePort addresses: the node's (or, without any, every local address but loopback).
	nodePortMatch := "fib daddr type local ip daddr != 127.0.0.0/8"
	tx.Add(&knftables.Set{Name: nodePortIPsSet, Type: "ipv4_addr", Comment: ptr.To("addresses that answer on NodePorts")})
	tx.Flush(&knftables.Set{Name: nodePortIPsSet})
	if len(s.nodeIPs) > 0 {
		nodePortMatch = "ip daddr @" + nodePortIPsSet
		for _, ip := range s.nodeIPs {
			tx.Add(&knftables.Element{Set: nodePortIPsSet, Key: []string{ip}})
		}
	}

	tx.Add(&knftables.Map{Name: noEndpointServicesMap, Type: "ipv4_addr . inet_proto . inet_service : verdict",
		Comment: ptr.To("verdicts for ClusterIP traffic of service ports without endpoints")})
	tx.Add(&knftables.Map{Name: noEndpointNodePortsMap, Type: "inet_proto . inet_service : verdict",
		Comment: ptr.To("verdicts for NodePort traffic of service ports without endpoints")})
	tx.Add(&knftables.Rule{Chain: serviceEndpointsCheckChain,
		Rule: "ip daddr . meta l4proto . th dport vmap @" + noEndpointServicesMap})
	tx.Add(&knftables.Rule{Chain: nodePortEndpointsCheckChain,
		Rule: nodePortMatch + " meta l4proto . th dport vmap @" + noEndpointNodePortsMap})

	tx.Add(&knftables.Map{Name: serviceIPsMap, Type: "ipv4_addr . inet_proto . inet_service : verdict",
		Comment: ptr.To("ClusterIP traffic")})
	tx.Add(&knftables.Map{Name: serviceNodePortsMap, Type: "inet_proto . inet_service : verdict",
		Comment: ptr.To("NodePort traffic")})
	tx.Add(&knftables.Rule{Chain: servicesChain, Rule: "ip daddr @" + clusterIPsSet + " ip saddr != " + s.clusterCIDR +
		" jump " + markMasqChain, Comment: ptr.To("ClusterIP traffic from outside the cluster CIDR")})
	tx.Add(&knftables.Rule{Chain: servicesChain, Rule: "ip daddr . meta l4proto . th dport vmap @" + serviceIPsMap})
	tx.Add(&knftables.Rule{Chain: servicesChain, Rule: nodePortMatch + " meta l4proto . th dport vmap @" + serviceNodePortsMap})

	tx.Flush(&knftables.Set{Name: clusterIPsSet})
	tx.Flush(&knftables.Set{Name: hairpinSet})
	for _, m := range []string{serviceIPsMap, serviceNodePortsMap, noEndpointServicesMap, noEndpointNodePortsMap} {
		tx.Flush(&knftables.Map{Name: m})
	}
}

func setOf(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

func addRules(tx *knftables.Transaction, c Chain) {
	for _, r := range c.Rules {
		tx.Add(&knftables.Rule{Chain: c.Name, Rule: r})
	}
}

func addLBElements(b *elementBatch, m LBMap) {
	for i, v := range m.Values {
		b.add(&knftables.Element{Map: m.Name, Key: []string{strconv.Itoa(i)}, Value: []string{v}})
	}
}

// elementsPerCommand bounds the elements of one batched command.
const elementsPerCommand = 1000

// elementBatch gathers elements by set or map and writes them, in the order their sets
// first came, as one command per set (or per elementsPerCommand elements) when join is
// on, else one per element. nft takes a list of elements "{ k1 : v1, k2 : v2 }" where
// knftables writes one; a batched command is that list written as one knftables element
// whose key holds all but the last value. In a full sync it halves nft's work (parsing
// and the kernel's lookup of the set by name once per command). Elements with a comment
// are written one by one.
type elementBatch struct {
	join   bool
	order  []string
	groups map[string][]*knftables.Element
}

func (s *syncer) elements() *elementBatch {
	return &elementBatch{join: s.joinElements, groups: map[string][]*knftables.Element{}}
}

func (b *elementBatch) add(e *knftables.Element) {
	name := e.Set + "\x00" + e.Map
	if _, ok := b.groups[name]; !ok {
		b.order = append(b.order, name)
	}
	b.groups[name] = append(b.groups[name], e)
}

// write adds to tx, through op (Add or Delete), the elements gathered.
func (b *elementBatch) write(tx *knftables.Transaction, op func(*knftables.Transaction, knftables.Object)) {
	for _, name := range b.order {
		var plain []*knftables.Element
		for _, e := range b.groups[name] {
			if !b.join || e.Comment != nil {
				op(tx, e)
			} else {
				plain = append(plain, e)
			}
		}
		for len(plain) > 0 {
			n := min(len(plain), elementsPerCommand)
			op(tx, joinElements(plain[:n]))
			plain = plain[n:]
		}
	}
	b.order, b.groups = nil, map[string][]*knftables.Element{}
}

// joinElements is elements (of one set or map, without comments) as one element.
func joinElements(elements []*knftables.Element) *knftables.Element {
	if len(elements) == 1 {
		return elements[0]
	}
	var key strings.Builder
	for i, e := range elements {
		if i > 0 {
			if len(e.Value) > 0 || len(elements[i-1].Value) > 0 {
				key.WriteString(" : " + strings.Join(elements[i-1].Value, " . "))
			}
			key.WriteString(", ")
		}
		key.WriteString(strings.Join(e.Key, " . "))
	}
	last := elements[len(elements)-1]
	return &knftables.Element{Set: last.Set, Map: last.Map, Key: []string{key.String()}, Value: last.Value}
}

// lbMapObject is a load-balancing map: the value of `numgen random mod N` to a verdict or
// to an endpoint's address and port.
func lbMapObject(m LBMap) *knftables.Map {
	return &knftables.Map{Name: m.Name, TypeOf: "numgen random mod 1 : " + m.Type}
}

// sharedChange is how the Services of a partial sync change their need of one Shared
// element: those that drop it, those that take it, and who needs it afterwards.
type sharedChange struct {
	element    *Element
	drop, take map[types.NamespacedName]bool
	after      map[types.NamespacedName]bool
}

func (s *syncer) sharedChange(m map[string]*sharedChange, e *Element) *sharedChange {
	c := m[e.id()]
	if c == nil {
		c = &sharedChange{element: e, drop: map[types.NamespacedName]bool{}, take: map[types.NamespacedName]bool{}}
		m[e.id()] = c
	}
	return c
}

func affinitySetObject(set AffinitySet) *knftables.Set {
	// "dynamic" because the packet path adds to it (the kernel would add the flag itself
	// and a later add without it would then conflict).
	return &knftables.Set{
		Name:    set.Name,
		Type:    "ipv4_addr",
		Flags:   []knftables.SetFlag{knftables.DynamicFlag, knftables.TimeoutFlag},
		Timeout: ptr.To(set.Timeout),
	}
}

func elementObject(e *Element) *knftables.Element {
	o := &knftables.Element{Set: e.Set, Map: e.Map, Key: e.Key}
	if e.Value != "" {
		o.Value = []string{e.Value}
	}
	if e.Comment != "" {
		o.Comment = ptr.To(e.Comment)
	}
	return o
}

func elementsByID(st *ServiceState) map[string]*Element {
	m := make(map[string]*Element, len(st.Elements))
	for i := range st.Elements {
		m[st.Elements[i].id()] = &st.Elements[i]
	}
	return m
}

// sortedNames are m's keys by namespace and name, so that transactions come out the same
// for the same input.
func sortedNames[V any](m map[types.NamespacedName]V) []types.NamespacedName {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b types.NamespacedName) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return keys
}

// objectDiff collects how the named objects of the Services in a partial sync (chains
// with their rules, load-balancing maps with their verdicts) change: new ones to add,
// changed or gone ones to flush, gone ones to delete, and new or changed ones to write.
type objectDiff[T any] struct {
	adds, flushes, deletes []string
	writes                 []T
}

// diff adds the changes from old to cur of one Service's objects, named by name and
// holding content, and reports whether there were any.
func (d *objectDiff[T]) diff(old, cur []T, name func(T) string, content func(T) []string) (changed bool) {
	was := make(map[string][]string, len(old))
	for _, o := range old {
		was[name(o)] = content(o)
	}
	kept := make(map[string]bool, len(cur))
	for _, c := range cur {
		n := name(c)
		kept[n] = true
		before, existed := was[n]
		switch {
		case existed && slices.Equal(before, content(c)):
			continue
		case existed:
			d.flushes = append(d.flushes, n)
		default:
			d.adds = append(d.adds, n)
		}
		d.writes = append(d.writes, c)
		changed = true
	}
	for _, o := range old {
		if n := name(o); !kept[n] {
			d.flushes = append(d.flushes, n)
			d.deletes = append(d.deletes, n)
			changed = true
		}
	}
	return changed
}
