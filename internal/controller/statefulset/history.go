package statefulset

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/util/history"
)

// defaultHistoryLimit is how many old revisions a StatefulSet keeps when its
// revisionHistoryLimit is unset.
const defaultHistoryLimit = 10

// newRevision is revision number n of set's current template: named "<set>-<hash>" (the
// name pods carry in their controller-revision-hash label), labelled with the template's
// labels and the hash, annotated as the set, holding the patch that puts the template back.
func newRevision(set *appsv1.StatefulSet, data []byte, n int64) *appsv1.ControllerRevision {
	hash := history.Hash(&set.Spec.Template, set.Status.CollisionCount)
	l := make(map[string]string, len(set.Spec.Template.Labels)+1)
	for k, v := range set.Spec.Template.Labels {
		l[k] = v
	}
	l[RevisionHashLabel] = hash
	var annotations map[string]string
	if len(set.Annotations) > 0 {
		annotations = make(map[string]string, len(set.Annotations))
		for k, v := range set.Annotations {
			annotations[k] = v
		}
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: set.Name + "-" + hash, Namespace: set.Namespace, Labels: l, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{controllerRef(set)}},
		Data:     runtime.RawExtension{Raw: data},
		Revision: n,
	}
}

// templateAt is set with the template revision cr holds.
func templateAt(set *appsv1.StatefulSet, cr *appsv1.ControllerRevision) (*appsv1.StatefulSet, error) {
	var data struct {
		Spec struct {
			Template *corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(cr.Data.Raw, &data); err != nil || data.Spec.Template == nil {
		return nil, fmt.Errorf("controllerrevision %s holds no template: %v", cr.Name, err)
	}
	out := set.DeepCopy()
	out.Spec.Template = *data.Spec.Template
	return out, nil
}

// revisions are set's ControllerRevisions: the ones it controls, and orphans matching
// its selector, which it adopts.
func (c *Controller) revisions(ctx context.Context, set *appsv1.StatefulSet) ([]*appsv1.ControllerRevision, error) {
	sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("selector of statefulset %s/%s: %w", set.Namespace, set.Name, err)
	}
	list, err := c.crLister.ControllerRevisions(set.Namespace).List(sel)
	if err != nil {
		return nil, err
	}
	var out []*appsv1.ControllerRevision
	for _, cr := range list {
		ref := metav1.GetControllerOf(cr)
		switch {
		case ref != nil && ref.UID == set.UID:
			out = append(out, cr)
		case ref == nil && cr.DeletionTimestamp == nil && !sel.Empty():
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
				"ownerReferences": []metav1.OwnerReference{controllerRef(set)}, "uid": cr.UID}})
			adopted, err := c.client.AppsV1().ControllerRevisions(set.Namespace).Patch(ctx, cr.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return nil, fmt.Errorf("adopt controllerrevision %s: %w", cr.Name, err)
			}
			out = append(out, adopted)
		}
	}
	history.SortByRevision(out)
	return out, nil
}

// history returns set's current revision (the one status.currentRevision names, or the
// update revision when none does) and its update revision: the revision of its template,
// made when none holds it, and numbered above the others when an older one does (a
// rollback).
func (c *Controller) history(ctx context.Context, set *appsv1.StatefulSet, revs []*appsv1.ControllerRevision) (current, update *appsv1.ControllerRevision, err error) {
	data, err := history.TemplatePatch(set)
	if err != nil {
		return nil, nil, err
	}
	next := history.MaxRevision(revs) + 1
	var equal *appsv1.ControllerRevision
	for _, cr := range revs {
		if bytes.Equal(cr.Data.Raw, data) {
			equal = cr // revs are sorted: the last equal one is the newest
		}
	}
	switch {
	case equal != nil && equal == revs[len(revs)-1]:
		update = equal
	case equal != nil:
		renumbered := equal.DeepCopy()
		renumbered.Revision = next
		if update, err = c.client.AppsV1().ControllerRevisions(set.Namespace).Update(ctx, renumbered, metav1.UpdateOptions{}); err != nil {
			return nil, nil, fmt.Errorf("renumber controllerrevision %s: %w", renumbered.Name, err)
		}
	default:
		if update, err = c.snapshot(ctx, set, data, next); err != nil {
			return nil, nil, err
		}
	}
	for _, cr := range revs {
		if cr.Name == set.Status.CurrentRevision {
			current = cr
		}
	}
	if current == nil || current.Name == update.Name {
		current = update
	}
	return current, update, nil
}

// snapshot creates revision n of set's template. A revision of that name holding another
// template is a hash collision: status.collisionCount goes up, so that the retry hashes
// differently.
func (c *Controller) snapshot(ctx context.Context, set *appsv1.StatefulSet, data []byte, n int64) (*appsv1.ControllerRevision, error) {
	return history.Create(ctx, c.client.AppsV1().ControllerRevisions(set.Namespace), newRevision(set, data, n), set.UID,
		func(ctx context.Context) error {
			fresh, err := c.client.AppsV1().StatefulSets(set.Namespace).Get(ctx, set.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("get statefulset %s/%s: %w", set.Namespace, set.Name, err)
			}
			if ptr.Deref(fresh.Status.CollisionCount, 0) != ptr.Deref(set.Status.CollisionCount, 0) {
				return fmt.Errorf("the collision count of statefulset %s/%s changed meanwhile", set.Namespace, set.Name)
			}
			fresh.Status.CollisionCount = ptr.To(ptr.Deref(fresh.Status.CollisionCount, 0) + 1)
			if _, err := c.client.AppsV1().StatefulSets(set.Namespace).UpdateStatus(ctx, fresh, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("count hash collision of statefulset %s/%s: %w", set.Namespace, set.Name, err)
			}
			return nil
		})
}

// cleanupHistory deletes the old revisions of set beyond its revisionHistoryLimit that
// are not live.
func (c *Controller) cleanupHistory(ctx context.Context, set *appsv1.StatefulSet, revs []*appsv1.ControllerRevision, live map[string]bool) error {
	limit := defaultHistoryLimit
	if set.Spec.RevisionHistoryLimit != nil {
		limit = int(*set.Spec.RevisionHistoryLimit)
	}
	for _, cr := range history.ToDelete(revs, func(r *appsv1.ControllerRevision) bool { return live[r.Name] }, limit) {
		err := c.client.AppsV1().ControllerRevisions(set.Namespace).Delete(ctx, cr.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cr.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete old controllerrevision %s: %w", cr.Name, err)
		}
	}
	return nil
}
