package daemonset

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/util/history"
)

// defaultHistoryLimit is how many old revisions a DaemonSet keeps when its
// revisionHistoryLimit is unset.
const defaultHistoryLimit = 10

// controllerRef is the controller reference of what ds owns.
func controllerRef(ds *appsv1.DaemonSet) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "DaemonSet", Name: ds.Name, UID: ds.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// templateGeneration is ds's template generation, which the API server keeps in the
// deprecated.daemonset.template.generation annotation (nil without one).
func templateGeneration(ds *appsv1.DaemonSet) *int64 {
	v, ok := ds.Annotations[appsv1.DeprecatedTemplateGeneration]
	if !ok {
		return nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil
	}
	return &n
}

// podUpdated says whether pod runs ds's current template: its revision hash is hash,
// or its template generation label is ds's template generation gen.
func podUpdated(pod *corev1.Pod, hash string, gen *int64) bool {
	if pod.Labels[RevisionHashLabel] == hash {
		return true
	}
	return gen != nil && pod.Labels[TemplateGenerationLabel] == strconv.FormatInt(*gen, 10)
}

// matches says whether revision cr holds ds's current template.
func matches(ds *appsv1.DaemonSet, cr *appsv1.ControllerRevision) (bool, error) {
	patch, err := history.TemplatePatch(ds)
	if err != nil {
		return false, err
	}
	return bytes.Equal(patch, cr.Data.Raw), nil
}

// newRevision is the revision number n of ds's current template, named and labelled
// with hash; it carries the template's labels and ds's annotations.
func newRevision(ds *appsv1.DaemonSet, hash string, data []byte, n int64) *appsv1.ControllerRevision {
	l := make(map[string]string, len(ds.Spec.Template.Labels)+1)
	for k, v := range ds.Spec.Template.Labels {
		l[k] = v
	}
	l[RevisionHashLabel] = hash
	var annotations map[string]string
	if len(ds.Annotations) > 0 {
		annotations = make(map[string]string, len(ds.Annotations))
		for k, v := range ds.Annotations {
			annotations[k] = v
		}
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: ds.Name + "-" + hash, Namespace: ds.Namespace, Labels: l, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{controllerRef(ds)}},
		Data:     runtime.RawExtension{Raw: data},
		Revision: n,
	}
}

// revisions are ds's ControllerRevisions: the ones it controls, and orphans matching
// its selector, which it adopts.
func (c *Controller) revisions(ctx context.Context, ds *appsv1.DaemonSet) ([]*appsv1.ControllerRevision, error) {
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("selector of daemonset %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	list, err := c.crLister.ControllerRevisions(ds.Namespace).List(sel)
	if err != nil {
		return nil, err
	}
	var out []*appsv1.ControllerRevision
	for _, cr := range list {
		ref := metav1.GetControllerOf(cr)
		switch {
		case ref != nil && ref.UID == ds.UID:
			out = append(out, cr)
		case ref == nil && cr.DeletionTimestamp == nil && !sel.Empty():
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
				"ownerReferences": []metav1.OwnerReference{controllerRef(ds)}, "uid": cr.UID}})
			adopted, err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Patch(ctx, cr.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return nil, fmt.Errorf("adopt controllerrevision %s: %w", cr.Name, err)
			}
			out = append(out, adopted)
		}
	}
	return out, nil
}

// history returns ds's current revision, made when none holds its template, numbered
// above every old one (a rollback renumbers the revision it returns to), and the old
// revisions.
func (c *Controller) history(ctx context.Context, ds *appsv1.DaemonSet) (*appsv1.ControllerRevision, []*appsv1.ControllerRevision, error) {
	all, err := c.revisions(ctx, ds)
	if err != nil {
		return nil, nil, err
	}
	var current, old []*appsv1.ControllerRevision
	for _, cr := range all {
		ok, err := matches(ds, cr)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			current = append(current, cr)
		} else {
			old = append(old, cr)
		}
	}
	next := history.MaxRevision(old) + 1
	if len(current) == 0 {
		cur, err := c.snapshot(ctx, ds, next)
		return cur, old, err
	}
	cur, err := c.dedup(ctx, ds, current)
	if err != nil {
		return nil, nil, err
	}
	if cur.Revision < next {
		renumbered := cur.DeepCopy()
		renumbered.Revision = next
		if cur, err = c.client.AppsV1().ControllerRevisions(ds.Namespace).Update(ctx, renumbered, metav1.UpdateOptions{}); err != nil {
			return nil, nil, fmt.Errorf("renumber controllerrevision %s: %w", renumbered.Name, err)
		}
	}
	return cur, old, nil
}

// snapshot creates revision n of ds's template. A revision of that name holding another
// template is a hash collision: status.collisionCount goes up, so that the retry hashes
// differently.
func (c *Controller) snapshot(ctx context.Context, ds *appsv1.DaemonSet, n int64) (*appsv1.ControllerRevision, error) {
	data, err := history.TemplatePatch(ds)
	if err != nil {
		return nil, err
	}
	cr := newRevision(ds, history.Hash(&ds.Spec.Template, ds.Status.CollisionCount), data, n)
	return history.Create(ctx, c.client.AppsV1().ControllerRevisions(ds.Namespace), cr, ds.UID, func(ctx context.Context) error {
		fresh, err := c.client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get daemonset %s/%s: %w", ds.Namespace, ds.Name, err)
		}
		if ptr.Deref(fresh.Status.CollisionCount, 0) != ptr.Deref(ds.Status.CollisionCount, 0) {
			return fmt.Errorf("the collision count of daemonset %s/%s changed meanwhile", ds.Namespace, ds.Name)
		}
		fresh.Status.CollisionCount = ptr.To(ptr.Deref(fresh.Status.CollisionCount, 0) + 1)
		if _, err := c.client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, fresh, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("count hash collision of daemonset %s/%s: %w", ds.Namespace, ds.Name, err)
		}
		return nil
	})
}

// dedup keeps the highest-numbered of several revisions holding ds's template: the pods
// of the others are relabelled with its hash (they run the same template), and the
// others deleted.
func (c *Controller) dedup(ctx context.Context, ds *appsv1.DaemonSet, current []*appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	history.SortByRevision(current)
	keep := current[len(current)-1]
	if len(current) == 1 {
		return keep, nil
	}
	hash := keep.Labels[RevisionHashLabel]
	pods, err := c.podLister.Pods(ds.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, dup := range current[:len(current)-1] {
		dupHash := dup.Labels[RevisionHashLabel]
		for _, p := range pods {
			if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != ds.UID || p.Labels[RevisionHashLabel] != dupHash {
				continue
			}
			patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, RevisionHashLabel, hash)
			if _, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("relabel pod %s: %w", p.Name, err)
			}
		}
		if err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Delete(ctx, dup.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("delete duplicate controllerrevision %s: %w", dup.Name, err)
		}
	}
	return keep, nil
}

// cleanupHistory deletes the old revisions of ds beyond its revisionHistoryLimit that
// none of pods (all of ds's, terminating ones too) runs.
func (c *Controller) cleanupHistory(ctx context.Context, ds *appsv1.DaemonSet, old []*appsv1.ControllerRevision, pods []*corev1.Pod) error {
	limit := defaultHistoryLimit
	if ds.Spec.RevisionHistoryLimit != nil {
		limit = int(*ds.Spec.RevisionHistoryLimit)
	}
	inUse := map[string]bool{}
	for _, p := range pods {
		if h := p.Labels[RevisionHashLabel]; h != "" {
			inUse[h] = true
		}
	}
	for _, cr := range history.ToDelete(old, func(r *appsv1.ControllerRevision) bool { return inUse[r.Labels[RevisionHashLabel]] }, limit) {
		err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Delete(ctx, cr.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cr.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete old controllerrevision %s: %w", cr.Name, err)
		}
	}
	return nil
}
