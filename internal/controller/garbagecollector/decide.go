package garbagecollector

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ownerState is what the collector knows of one owner of a dependent.
type ownerState int

const (
	ownerSolid   ownerState = iota // exists and is not waiting for its dependents
	ownerAbsent                    // gone (or another object now has its name)
	ownerWaiting                   // being deleted in the foreground: dependents must go
)

// action is what attemptToDelete does with an object.
type action struct {
	// removeOwners are references (by UID) to drop from the object.
	removeOwners []types.UID
	// unblockOwners are references (by UID) whose blockOwnerDeletion must be cleared
	// before a foreground delete, to break a cycle of foreground deletions.
	unblockOwners []types.UID
	// delete the object with policy.
	delete bool
	policy metav1.DeletionPropagation
}

// decide is upstream's attemptToDeleteItem decision for an object with refs, given the
// state of each owner, the object's own finalizers, whether it has dependents and
// whether one of them is itself deleting its dependents.
func decide(refs []metav1.OwnerReference, states map[types.UID]ownerState, finalizers []string, hasDependents, dependentDeletingDependents bool) action {
	if len(refs) == 0 {
		return action{}
	}
	var solid, absent, waiting []types.UID
	for _, r := range refs {
		switch states[r.UID] {
		case ownerSolid:
			solid = append(solid, r.UID)
		case ownerAbsent:
			absent = append(absent, r.UID)
		case ownerWaiting:
			waiting = append(waiting, r.UID)
		}
	}
	switch {
	case len(solid) > 0:
		// Kept alive by a live owner; only the references to owners that are gone or
		// going are dropped.
		return action{removeOwners: append(absent, waiting...)}
	case len(waiting) > 0 && hasDependents:
		// Its owner waits for it, and it has dependents of its own: delete it in the
		// foreground so they go first.
		a := action{delete: true, policy: metav1.DeletePropagationForeground}
		if dependentDeletingDependents {
			for _, r := range refs {
				if states[r.UID] == ownerWaiting && r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
					a.unblockOwners = append(a.unblockOwners, r.UID)
				}
			}
		}
		return a
	default:
		policy := metav1.DeletePropagationBackground
		switch {
		case hasString(finalizers, metav1.FinalizerOrphanDependents):
			policy = metav1.DeletePropagationOrphan
		case hasString(finalizers, metav1.FinalizerDeleteDependents):
			policy = metav1.DeletePropagationForeground
		}
		return action{delete: true, policy: policy}
	}
}

// blocking says which of dependents (their references to owner) hold the owner's
// foreground deletion: those with blockOwnerDeletion=true.
func blocking(owner types.UID, dependents map[types.UID][]metav1.OwnerReference) []types.UID {
	var out []types.UID
	for uid, refs := range dependents {
		for _, r := range refs {
			if r.UID == owner && r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
				out = append(out, uid)
				break
			}
		}
	}
	return out
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
