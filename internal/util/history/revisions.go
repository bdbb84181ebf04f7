package history

import (
	"bytes"
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsclient "k8s.io/client-go/kubernetes/typed/apps/v1"
)

// ToDelete are the revisions of revs beyond limit, oldest first, sparing those live says
// are in use.
func ToDelete(revs []*appsv1.ControllerRevision, live func(*appsv1.ControllerRevision) bool, limit int) []*appsv1.ControllerRevision {
	var candidates []*appsv1.ControllerRevision
	for _, r := range revs {
		if !live(r) {
			candidates = append(candidates, r)
		}
	}
	extra := len(candidates) - limit
	if extra <= 0 {
		return nil
	}
	SortByRevision(candidates)
	return candidates[:extra]
}

// Create creates revision cr of the owner whose UID is owner. A revision of that name
// already there is returned when the owner controls it and it holds cr's data (the cache
// had not seen it yet); one holding another template is a hash collision: collided
// raises the owner's status.collisionCount, so that a retry hashes differently, and the
// error says so.
func Create(ctx context.Context, revs appsclient.ControllerRevisionInterface, cr *appsv1.ControllerRevision, owner types.UID,
	collided func(ctx context.Context) error) (*appsv1.ControllerRevision, error) {
	created, err := revs.Create(ctx, cr, metav1.CreateOptions{})
	if err == nil {
		return created, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create controllerrevision %s: %w", cr.Name, err)
	}
	existing, err := revs.Get(ctx, cr.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get controllerrevision %s: %w", cr.Name, err)
	}
	if ref := metav1.GetControllerOf(existing); ref != nil && ref.UID == owner && bytes.Equal(existing.Data.Raw, cr.Data.Raw) {
		return existing, nil
	}
	if err := collided(ctx); err != nil {
		return nil, fmt.Errorf("controllerrevision %s: %w", cr.Name, err)
	}
	return nil, fmt.Errorf("controllerrevision %s exists with another template (hash collision)", cr.Name)
}
