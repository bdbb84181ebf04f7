package garbagecollector

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// node is one object the collector has seen.
type node struct {
	gvr        schema.GroupVersionResource
	namespace  string
	name       string
	uid        types.UID
	owners     []metav1.OwnerReference
	deleting   bool
	finalizers []string
}

func (n *node) deletingDependents() bool {
	return n.deleting && hasString(n.finalizers, metav1.FinalizerDeleteDependents)
}

// graph is the owner → dependents graph of every watched object, keyed by UID. An
// owner's entry in dependents exists as soon as a dependent names it, even if the
// owner itself is not (or no longer) in nodes.
type graph struct {
	mu         sync.RWMutex
	nodes      map[types.UID]*node
	dependents map[types.UID]sets.Set[types.UID]
}

func newGraph() *graph {
	return &graph{nodes: map[types.UID]*node{}, dependents: map[types.UID]sets.Set[types.UID]{}}
}

// upsert records n and returns the node it replaced, if any.
func (g *graph) upsert(n *node) *node {
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.nodes[n.uid]
	if old != nil {
		for _, r := range old.owners {
			if deps := g.dependents[r.UID]; deps != nil {
				deps.Delete(n.uid)
				if deps.Len() == 0 {
					delete(g.dependents, r.UID)
				}
			}
		}
	}
	g.nodes[n.uid] = n
	for _, r := range n.owners {
		if g.dependents[r.UID] == nil {
			g.dependents[r.UID] = sets.New[types.UID]()
		}
		g.dependents[r.UID].Insert(n.uid)
	}
	return old
}

// remove forgets uid and returns its node (nil if unknown).
func (g *graph) remove(uid types.UID) *node {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.nodes[uid]
	if n == nil {
		return nil
	}
	delete(g.nodes, uid)
	for _, r := range n.owners {
		if deps := g.dependents[r.UID]; deps != nil {
			deps.Delete(uid)
			if deps.Len() == 0 {
				delete(g.dependents, r.UID)
			}
		}
	}
	return n
}

func (g *graph) get(uid types.UID) *node {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.nodes[uid]
}

// dependentsOf returns the known dependents of owner with their owner references.
func (g *graph) dependentsOf(owner types.UID) map[types.UID][]metav1.OwnerReference {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := map[types.UID][]metav1.OwnerReference{}
	for uid := range g.dependents[owner] {
		if n := g.nodes[uid]; n != nil {
			out[uid] = n.owners
		}
	}
	return out
}

// hasDependents says whether any object names uid as its owner; deletingDeps says
// whether one of those is itself deleting its dependents.
func (g *graph) hasDependents(uid types.UID) (has, deletingDeps bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	for d := range g.dependents[uid] {
		if n := g.nodes[d]; n != nil {
			has = true
			if n.deletingDependents() {
				deletingDeps = true
			}
		}
	}
	return has, deletingDeps
}

func ownersChanged(a, b []metav1.OwnerReference) bool {
	if len(a) != len(b) {
		return true
	}
	for i := range a {
		if a[i].UID != b[i].UID || (a[i].BlockOwnerDeletion == nil) != (b[i].BlockOwnerDeletion == nil) ||
			(a[i].BlockOwnerDeletion != nil && *a[i].BlockOwnerDeletion != *b[i].BlockOwnerDeletion) {
			return true
		}
	}
	return false
}
