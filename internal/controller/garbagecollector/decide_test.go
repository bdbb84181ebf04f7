package garbagecollector

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func ref(uid string, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{UID: types.UID(uid), Name: uid, Kind: "ConfigMap", APIVersion: "v1", BlockOwnerDeletion: ptr.To(block)}
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name          string
		refs          []metav1.OwnerReference
		states        map[types.UID]ownerState
		finalizers    []string
		hasDeps, loop bool
		want          action
	}{
		{"no owners: left alone", nil, nil, nil, false, false, action{}},
		{"live owner: kept", []metav1.OwnerReference{ref("a", true)}, map[types.UID]ownerState{"a": ownerSolid}, nil, false, false, action{}},
		{"owner gone: deleted in the background", []metav1.OwnerReference{ref("a", true)}, map[types.UID]ownerState{"a": ownerAbsent}, nil, false, false,
			action{delete: true, policy: metav1.DeletePropagationBackground}},
		{"one of two owners gone: reference dropped", []metav1.OwnerReference{ref("a", true), ref("b", false)},
			map[types.UID]ownerState{"a": ownerAbsent, "b": ownerSolid}, nil, false, false, action{removeOwners: []types.UID{"a"}}},
		{"waiting owner and a live one: reference dropped", []metav1.OwnerReference{ref("a", true), ref("b", false)},
			map[types.UID]ownerState{"a": ownerWaiting, "b": ownerSolid}, nil, false, false, action{removeOwners: []types.UID{"a"}}},
		{"owner waits, no dependents: plain delete", []metav1.OwnerReference{ref("a", true)}, map[types.UID]ownerState{"a": ownerWaiting}, nil, false, false,
			action{delete: true, policy: metav1.DeletePropagationBackground}},
		{"owner waits, has dependents: foreground", []metav1.OwnerReference{ref("a", true)}, map[types.UID]ownerState{"a": ownerWaiting}, nil, true, false,
			action{delete: true, policy: metav1.DeletePropagationForeground}},
		{"cycle of foreground deletions: unblock first", []metav1.OwnerReference{ref("a", true)}, map[types.UID]ownerState{"a": ownerWaiting}, nil, true, true,
			action{delete: true, policy: metav1.DeletePropagationForeground, unblockOwners: []types.UID{"a"}}},
		{"own orphan finalizer: delete orphaning", []metav1.OwnerReference{ref("a", true)}, map[types.UID]ownerState{"a": ownerAbsent},
			[]string{metav1.FinalizerOrphanDependents}, true, false, action{delete: true, policy: metav1.DeletePropagationOrphan}},
		{"own foreground finalizer: delete in foreground", []metav1.OwnerReference{ref("a", true)}, map[types.UID]ownerState{"a": ownerAbsent},
			[]string{metav1.FinalizerDeleteDependents}, true, false, action{delete: true, policy: metav1.DeletePropagationForeground}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide(tc.refs, tc.states, tc.finalizers, tc.hasDeps, tc.loop); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestBlocking(t *testing.T) {
	deps := map[types.UID][]metav1.OwnerReference{
		"blocks":     {ref("owner", true)},
		"nonblock":   {ref("owner", false)},
		"otherowner": {ref("x", true)},
		"both":       {ref("x", false), ref("owner", true)},
	}
	got := blocking("owner", deps)
	if len(got) != 2 || !hasUID(got, "blocks") || !hasUID(got, "both") {
		t.Errorf("blocking = %v, want blocks and both", got)
	}
}

func TestGraph(t *testing.T) {
	g := newGraph()
	g.upsert(&node{uid: "owner"})
	g.upsert(&node{uid: "dep", owners: []metav1.OwnerReference{ref("owner", true)}})
	if has, _ := g.hasDependents("owner"); !has {
		t.Fatal("owner has no dependents")
	}
	// The dependent lets go of its owner.
	g.upsert(&node{uid: "dep"})
	if has, _ := g.hasDependents("owner"); has {
		t.Fatal("dependents not updated when owners change")
	}
	g.upsert(&node{uid: "dep", owners: []metav1.OwnerReference{ref("owner", true)}, deleting: true, finalizers: []string{metav1.FinalizerDeleteDependents}})
	if _, loop := g.hasDependents("owner"); !loop {
		t.Error("dependent deleting its dependents not reported")
	}
	g.remove("dep")
	if len(g.dependentsOf("owner")) != 0 || len(g.dependents) != 0 {
		t.Errorf("remove left dependents: %v", g.dependents)
	}
}
