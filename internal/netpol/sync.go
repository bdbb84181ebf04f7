package netpol

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/knftables"
)

// tableSyncer brings one table to a Ruleset, one transaction per call.
type tableSyncer struct {
	nft knftables.Interface
	// applied is what the last successful transaction left in the table; nil when that
	// is unknown (before the first sync, after a failure), which forces a full sync.
	applied *Ruleset
}

// apply makes the table hold next: as element and chain changes against what the
// previous apply left, or, when full or that is unknown, by replacing the table. It
// returns the number of nft operations run (0: nothing to do).
func (s *tableSyncer) apply(ctx context.Context, next *Ruleset, full bool) (int, error) {
	tx := s.nft.NewTransaction()
	if full || s.applied == nil {
		planFull(tx, next)
	} else {
		planDiff(tx, s.applied, next)
	}
	n := tx.NumOperations()
	if n == 0 {
		return 0, nil
	}
	if err := s.nft.Run(ctx, tx); err != nil {
		s.applied = nil
		return n, fmt.Errorf("nft transaction of %d operations: %w", n, err)
	}
	s.applied = next
	return n, nil
}

// planFull adds to tx the operations that replace the table (whatever it holds, or its
// absence) by a table holding next; the kernel applies them atomically, so no packet
// sees a half-built table.
func planFull(tx *knftables.Transaction, next *Ruleset) {
	tx.Add(&knftables.Table{})
	tx.Delete(&knftables.Table{})
	tx.Add(&knftables.Table{Comment: knftables.PtrTo("NetworkPolicy of this node's pods, managed by kubelab")})
	tx.Add(&knftables.Chain{
		Name:     forwardChain,
		Type:     knftables.PtrTo(knftables.FilterType),
		Hook:     knftables.PtrTo(knftables.ForwardHook),
		Priority: knftables.PtrTo(knftables.FilterPriority),
		Policy:   knftables.PtrTo(knftables.AcceptPolicy),
	})
	tx.Add(&knftables.Map{Name: ingressPodsMap, Type: mapType})
	tx.Add(&knftables.Map{Name: egressPodsMap, Type: mapType})
	for _, name := range sortedKeys(next.Sets) {
		addSet(tx, name, next.Sets[name])
		for _, e := range next.Sets[name].Elements {
			tx.Add(&knftables.Element{Set: name, Key: e})
		}
	}
	for _, name := range sortedKeys(next.Chains) {
		tx.Add(&knftables.Chain{Name: name})
		addRules(tx, name, next.Chains[name])
	}
	addRules(tx, forwardChain, forwardRules)
	addMapElements(tx, ingressPodsMap, nil, next.Ingress)
	addMapElements(tx, egressPodsMap, nil, next.Egress)
}

// planDiff adds to tx the operations that turn a table holding prev into one holding
// next: element changes for sets and maps, flush-and-rewrite for chains whose rules
// changed. Order matters to the kernel: map elements leave before their chains, chains
// stop referring to sets before those go, sets exist before rules use them.
func planDiff(tx *knftables.Transaction, prev, next *Ruleset) {
	deleteMapElements(tx, ingressPodsMap, prev.Ingress, next.Ingress)
	deleteMapElements(tx, egressPodsMap, prev.Egress, next.Egress)
	for _, name := range sortedKeys(prev.Chains) {
		if _, keep := next.Chains[name]; !keep {
			tx.Flush(&knftables.Chain{Name: name})
		}
	}
	for _, name := range sortedKeys(next.Sets) {
		set := next.Sets[name]
		old, ok := prev.Sets[name]
		if !ok {
			addSet(tx, name, set)
		}
		var oldElems [][]string
		if ok {
			oldElems = old.Elements
		}
		del, add := diffElements(oldElems, set.Elements)
		for _, e := range del {
			tx.Delete(&knftables.Element{Set: name, Key: e})
		}
		for _, e := range add {
			tx.Add(&knftables.Element{Set: name, Key: e})
		}
	}
	for _, name := range sortedKeys(next.Chains) {
		rules := next.Chains[name]
		old, ok := prev.Chains[name]
		switch {
		case !ok:
			tx.Add(&knftables.Chain{Name: name})
		case slices.Equal(old, rules):
			continue
		default:
			tx.Flush(&knftables.Chain{Name: name})
		}
		addRules(tx, name, rules)
	}
	addMapElements(tx, ingressPodsMap, prev.Ingress, next.Ingress)
	addMapElements(tx, egressPodsMap, prev.Egress, next.Egress)
	for _, name := range sortedKeys(prev.Chains) {
		if _, keep := next.Chains[name]; !keep {
			tx.Delete(&knftables.Chain{Name: name})
		}
	}
	for _, name := range sortedKeys(prev.Sets) {
		if _, keep := next.Sets[name]; !keep {
			tx.Delete(&knftables.Set{Name: name})
		}
	}
}

func addSet(tx *knftables.Transaction, name string, s *Set) {
	set := &knftables.Set{Name: name, Type: s.Type}
	if s.Interval {
		set.Flags = []knftables.SetFlag{knftables.IntervalFlag}
	}
	tx.Add(set)
}

func addRules(tx *knftables.Transaction, chain string, rules []string) {
	for _, r := range rules {
		tx.Add(&knftables.Rule{Chain: chain, Rule: r})
	}
}

// deleteMapElements removes the elements of prev that next lacks or maps elsewhere.
func deleteMapElements(tx *knftables.Transaction, m string, prev, next map[string]string) {
	for _, addr := range sortedKeys(prev) {
		if next[addr] != prev[addr] {
			tx.Delete(&knftables.Element{Map: m, Key: []string{addr}})
		}
	}
}

// addMapElements adds the elements of next that prev lacks or maps elsewhere.
func addMapElements(tx *knftables.Transaction, m string, prev, next map[string]string) {
	for _, addr := range sortedKeys(next) {
		if prev[addr] != next[addr] {
			tx.Add(&knftables.Element{Map: m, Key: []string{addr}, Value: []string{"jump " + next[addr]}})
		}
	}
}

// diffElements returns the elements of prev missing from next and those of next missing
// from prev.
func diffElements(prev, next [][]string) (del, add [][]string) {
	in := func(s [][]string) map[string]bool {
		m := make(map[string]bool, len(s))
		for _, e := range s {
			m[strings.Join(e, " . ")] = true
		}
		return m
	}
	p, n := in(prev), in(next)
	for _, e := range prev {
		if !n[strings.Join(e, " . ")] {
			del = append(del, e)
		}
	}
	for _, e := range next {
		if !p[strings.Join(e, " . ")] {
			add = append(add, e)
		}
	}
	return del, add
}
