package apiserver

import (
	"maps"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/discovery"
)

// listedGroups keeps the entries of the unaggregated discovery (/apis as an
// APIGroupList) of the groups the server's own rows do not serve: those of established
// CRDs (customresources.go) and those of APIServices that name a Service
// (aggregator.go). A group both give is listed as its APIServices say, since its
// requests go to the aggregated server. The server's own groups are listed by the
// server itself and never touched here.
type listedGroups struct {
	target discovery.GroupManager
	own    sets.Set[string]

	mu                 sync.Mutex
	custom, aggregated map[string]metav1.APIGroup
	listed             map[string]metav1.APIGroup
}

func newListedGroups(target discovery.GroupManager, own sets.Set[string]) *listedGroups {
	return &listedGroups{target: target, own: own}
}

// setCustom makes groups the CRDs' groups.
func (l *listedGroups) setCustom(groups map[string]metav1.APIGroup) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.custom = groups
	l.apply()
}

// setAggregated makes groups the APIServices' groups.
func (l *listedGroups) setAggregated(groups map[string]metav1.APIGroup) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.aggregated = groups
	l.apply()
}

// apply brings the target's entries from what was listed to what must be.
func (l *listedGroups) apply() {
	want := effectiveGroups(l.own, l.custom, l.aggregated)
	for _, g := range slices.Sorted(maps.Keys(l.listed)) {
		if _, ok := want[g]; !ok {
			l.target.RemoveGroup(g)
		}
	}
	for _, g := range slices.Sorted(maps.Keys(want)) {
		if have, ok := l.listed[g]; !ok || !equality.Semantic.DeepEqual(have, want[g]) {
			l.target.AddGroup(want[g])
		}
	}
	l.listed = want
}

// effectiveGroups are the entries to list: the custom groups and the aggregated ones,
// an aggregated entry before a custom one of the same name, none of the own groups.
func effectiveGroups(own sets.Set[string], custom, aggregated map[string]metav1.APIGroup) map[string]metav1.APIGroup {
	out := map[string]metav1.APIGroup{}
	for _, from := range []map[string]metav1.APIGroup{custom, aggregated} {
		for name, g := range from {
			if !own.Has(name) {
				out[name] = g
			}
		}
	}
	return out
}
