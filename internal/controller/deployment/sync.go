package deployment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/util/worker"
)

// sync reconciles Deployment key: its ReplicaSets, their sizes, its status.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	cached, err := c.dLister.Deployments(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	d := cached.DeepCopy()
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || selector.Empty() {
		c.recorder.Event(d, corev1.EventTypeWarning, "SelectingAll", "This deployment is selecting all pods. A non-empty selector is required.")
		return nil
	}
	rsList, err := c.claimReplicaSets(ctx, d, selector)
	if err != nil {
		return err
	}
	s := &syncState{c: c, key: key, d: d}
	if d.DeletionTimestamp != nil {
		return s.statusOnly(ctx, rsList)
	}
	s.pausedCondition()
	if d.Spec.Paused || isScalingEvent(d, rsList) {
		return s.scaleOnly(ctx, rsList)
	}
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return s.recreate(ctx, rsList)
	}
	return s.rolling(ctx, rsList)
}

// syncState is one sync of one Deployment: d is the working copy, written back at the end.
type syncState struct {
	c   *Controller
	key string
	d   *appsv1.Deployment
}

// claimReplicaSets returns the ReplicaSets d controls, adopting matching orphans and
// releasing owned ones that stopped matching.
func (c *Controller) claimReplicaSets(ctx context.Context, d *appsv1.Deployment, selector labels.Selector) ([]*appsv1.ReplicaSet, error) {
	all, err := c.rsLister.ReplicaSets(d.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var owned []*appsv1.ReplicaSet
	var errs []error
	for _, rs := range all {
		ref := metav1.GetControllerOf(rs)
		matches := selector.Matches(labels.Set(rs.Labels))
		switch {
		case ref != nil && ref.UID == d.UID:
			if matches || d.DeletionTimestamp != nil {
				owned = append(owned, rs)
				continue
			}
			patch := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"$patch":"delete","uid":%q}],"uid":%q}}`, d.UID, rs.UID)
			if _, err := c.client.AppsV1().ReplicaSets(rs.Namespace).Patch(ctx, rs.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("release replicaset %s: %w", rs.Name, err))
			}
		case ref == nil && matches && d.DeletionTimestamp == nil && rs.DeletionTimestamp == nil:
			fresh, err := c.client.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
			if err != nil || fresh.UID != d.UID || fresh.DeletionTimestamp != nil {
				continue
			}
			patch, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{
				"ownerReferences": []metav1.OwnerReference{*controllerRef(d)}, "uid": rs.UID}})
			out, err := c.client.AppsV1().ReplicaSets(rs.Namespace).Patch(ctx, rs.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			if err != nil {
				if !apierrors.IsNotFound(err) {
					errs = append(errs, fmt.Errorf("adopt replicaset %s: %w", rs.Name, err))
				}
				continue
			}
			owned = append(owned, out)
		}
	}
	return owned, errors.Join(errs...)
}

func controllerRef(d *appsv1.Deployment) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "Deployment", Name: d.Name, UID: d.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// split finds the new ReplicaSet (same template; the oldest of equals) and the old ones.
func split(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet) {
	var newRS *appsv1.ReplicaSet
	for _, rs := range rsList {
		if equalIgnoreHash(&rs.Spec.Template, &d.Spec.Template) && (newRS == nil || olderThan(rs, newRS)) {
			newRS = rs
		}
	}
	var olds []*appsv1.ReplicaSet
	for _, rs := range rsList {
		if rs != newRS {
			olds = append(olds, rs)
		}
	}
	return newRS, olds
}

// isScalingEvent says whether the Deployment's replicas changed since its active
// ReplicaSets were sized (their desired-replicas annotation).
func isScalingEvent(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) bool {
	for _, rs := range rsList {
		if specReplicas(rs) == 0 {
			continue
		}
		if desired, ok := annotatedInt(rs, DesiredReplicasAnnotation); ok && desired != replicasOf(d) {
			return true
		}
	}
	return false
}

// pausedCondition records pause and resume in the Progressing condition.
func (s *syncState) pausedCondition() {
	if s.d.Spec.ProgressDeadlineSeconds == nil {
		return
	}
	cur := getCondition(&s.d.Status, appsv1.DeploymentProgressing)
	now := s.c.cfg.Now()
	switch {
	case s.d.Spec.Paused && (cur == nil || cur.Reason != ReasonPaused):
		setCondition(&s.d.Status, condition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, ReasonPaused, "Deployment is paused", now))
	case !s.d.Spec.Paused && cur != nil && cur.Reason == ReasonPaused:
		setCondition(&s.d.Status, condition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, ReasonResumed, "Deployment is resumed", now))
	}
}

// newAndOld returns the new ReplicaSet (created when create is set and none exists)
// and the old ones, bringing revision annotations up to date.
func (s *syncState) newAndOld(ctx context.Context, rsList []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet, error) {
	d := s.d
	existing, olds := split(d, rsList)
	newRevision := maxRevision(olds) + 1
	now := s.c.cfg.Now()
	if existing != nil {
		rs := existing.DeepCopy()
		changed := setNewRSAnnotations(d, rs, newRevision)
		if rs.Spec.MinReadySeconds != d.Spec.MinReadySeconds {
			rs.Spec.MinReadySeconds, changed = d.Spec.MinReadySeconds, true
		}
		if changed {
			out, err := s.c.client.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, rs, metav1.UpdateOptions{})
			if err != nil {
				return nil, nil, fmt.Errorf("update replicaset %s: %w", rs.Name, err)
			}
			existing = out
		}
		if err := s.setRevision(ctx, existing); err != nil {
			return nil, nil, err
		}
		if d.Spec.ProgressDeadlineSeconds != nil && getCondition(&d.Status, appsv1.DeploymentProgressing) == nil {
			setCondition(&d.Status, condition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonFoundNewRS,
				fmt.Sprintf("Found new replica set %q", existing.Name), now))
		}
		return existing, olds, nil
	}
	if !create {
		return nil, olds, nil
	}
	hash := templateHash(&d.Spec.Template, d.Status.CollisionCount)
	template := d.Spec.Template.DeepCopy()
	template.Labels = labels.Merge(template.Labels, map[string]string{PodTemplateHashLabel: hash})
	selector := d.Spec.Selector.DeepCopy()
	selector.MatchLabels = labels.Merge(selector.MatchLabels, map[string]string{PodTemplateHashLabel: hash})
	size := replicasOf(d)
	if d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
		size = newRSReplicas(replicasOf(d), maxSurgeOf(d), olds, nil)
	}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: d.Name + "-" + hash, Namespace: d.Namespace, Labels: template.Labels,
			OwnerReferences: []metav1.OwnerReference{*controllerRef(d)},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(size), MinReadySeconds: d.Spec.MinReadySeconds, Selector: selector, Template: *template},
	}
	setNewRSAnnotations(d, rs, newRevision)
	setReplicasAnnotations(rs, replicasOf(d), replicasOf(d)+maxSurgeOf(d))
	created, err := s.c.client.AppsV1().ReplicaSets(d.Namespace).Create(ctx, rs, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		found, gerr := s.c.client.AppsV1().ReplicaSets(d.Namespace).Get(ctx, rs.Name, metav1.GetOptions{})
		if gerr != nil {
			return nil, nil, fmt.Errorf("get replicaset %s: %w", rs.Name, gerr)
		}
		if ref := metav1.GetControllerOf(found); ref != nil && ref.UID == d.UID && equalIgnoreHash(&found.Spec.Template, &d.Spec.Template) {
			return found, olds, nil // the cache had not seen it yet
		}
		// A hash collision: another template has this name. Count it, and the next
		// sync hashes differently.
		d.Status.CollisionCount = ptr.To(ptr.Deref(d.Status.CollisionCount, 0) + 1)
		if _, uerr := s.c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{}); uerr != nil {
			return nil, nil, fmt.Errorf("record hash collision of %s: %w", rs.Name, uerr)
		}
		return nil, nil, fmt.Errorf("replicaset %s exists with another template (hash collision)", rs.Name)
	}
	if worker.Gone(err) {
		// The namespace is going: nothing to report, and the key is not retried.
		return nil, nil, fmt.Errorf("create replicaset %s: %w", rs.Name, err)
	}
	if err != nil {
		msg := fmt.Sprintf("Failed to create new replica set %q: %v", rs.Name, err)
		if d.Spec.ProgressDeadlineSeconds != nil {
			setCondition(&d.Status, condition(appsv1.DeploymentProgressing, corev1.ConditionFalse, ReasonFailedRSCreate, msg, now))
			_ = s.writeStatus(ctx, d.Status)
		}
		s.c.recorder.Event(d, corev1.EventTypeWarning, ReasonFailedRSCreate, msg)
		return nil, nil, fmt.Errorf("create replicaset %s: %w", rs.Name, err)
	}
	if size > 0 {
		s.c.recorder.Eventf(d, corev1.EventTypeNormal, ReasonScalingReplicaSet, "Scaled up replica set %s from 0 to %d", created.Name, size)
	}
	if d.Spec.ProgressDeadlineSeconds != nil {
		setCondition(&d.Status, condition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonNewRSCreated,
			fmt.Sprintf("Created new replica set %q", created.Name), now))
	}
	if err := s.setRevision(ctx, created); err != nil {
		return nil, nil, err
	}
	return created, olds, nil
}

// setRevision gives the Deployment the revision annotation of its new ReplicaSet.
func (s *syncState) setRevision(ctx context.Context, newRS *appsv1.ReplicaSet) error {
	rev := newRS.Annotations[RevisionAnnotation]
	if rev == "" || s.d.Annotations[RevisionAnnotation] == rev {
		return nil
	}
	d := s.d.DeepCopy()
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[RevisionAnnotation] = rev
	out, err := s.c.client.AppsV1().Deployments(d.Namespace).Update(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("set revision %s on deployment %s: %w", rev, d.Name, err)
	}
	out.Status = s.d.Status // keep the working status
	s.d = out
	return nil
}

// scale sets rs's replicas to size (and the sizes it was made for) and says so in an
// Event; it returns the updated ReplicaSet and whether its size changed.
func (s *syncState) scale(ctx context.Context, rs *appsv1.ReplicaSet, size int32) (*appsv1.ReplicaSet, bool, error) {
	d := s.d
	from := specReplicas(rs)
	out := rs.DeepCopy()
	annotated := setReplicasAnnotations(out, replicasOf(d), replicasOf(d)+maxSurgeOf(d))
	if from == size && !annotated {
		return rs, false, nil
	}
	out.Spec.Replicas = ptr.To(size)
	out, err := s.c.client.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, out, metav1.UpdateOptions{})
	if err != nil {
		return rs, false, fmt.Errorf("scale replicaset %s to %d: %w", rs.Name, size, err)
	}
	if from != size {
		dir := "up"
		if size < from {
			dir = "down"
		}
		s.c.recorder.Eventf(d, corev1.EventTypeNormal, ReasonScalingReplicaSet, "Scaled %s replica set %s from %d to %d", dir, rs.Name, from, size)
	}
	return out, from != size, nil
}

// rolling is one step of a RollingUpdate rollout.
func (s *syncState) rolling(ctx context.Context, rsList []*appsv1.ReplicaSet) error {
	newRS, olds, err := s.newAndOld(ctx, rsList, true)
	if err != nil {
		return err
	}
	d := s.d
	all := append(append([]*appsv1.ReplicaSet(nil), olds...), newRS)
	if size := newRSReplicas(replicasOf(d), maxSurgeOf(d), all, newRS); size != specReplicas(newRS) {
		updated, _, err := s.scale(ctx, newRS, size)
		if err != nil {
			return err
		}
		return s.rolloutStatus(ctx, updated, olds)
	}
	plan := oldScaleDown(replicasOf(d), maxUnavailableOf(d), newRS, olds)
	scaled := false
	for i, rs := range olds {
		size, ok := plan[rs.Name]
		if !ok {
			continue
		}
		updated, changed, err := s.scale(ctx, rs, size)
		if err != nil {
			return err
		}
		olds[i] = updated
		scaled = scaled || changed
	}
	if !scaled {
		if complete(d, &d.Status) {
			if err := s.cleanup(ctx, olds); err != nil {
				return err
			}
		}
	}
	return s.rolloutStatus(ctx, newRS, olds)
}

// recreate is one step of a Recreate rollout: old ReplicaSets to zero, wait until
// their pods are gone, then the new one.
func (s *syncState) recreate(ctx context.Context, rsList []*appsv1.ReplicaSet) error {
	newRS, olds, err := s.newAndOld(ctx, rsList, false)
	if err != nil {
		return err
	}
	scaled := false
	for i, rs := range olds {
		if specReplicas(rs) == 0 {
			continue
		}
		updated, changed, err := s.scale(ctx, rs, 0)
		if err != nil {
			return err
		}
		olds[i] = updated
		scaled = scaled || changed
	}
	if scaled {
		return s.rolloutStatus(ctx, newRS, olds)
	}
	running, err := s.oldPodsRunning(olds)
	if err != nil {
		return err
	}
	if running {
		return s.rolloutStatus(ctx, newRS, olds)
	}
	if newRS == nil {
		if newRS, olds, err = s.newAndOld(ctx, rsList, true); err != nil {
			return err
		}
	}
	if specReplicas(newRS) != replicasOf(s.d) {
		if newRS, _, err = s.scale(ctx, newRS, replicasOf(s.d)); err != nil {
			return err
		}
	} else if complete(s.d, &s.d.Status) {
		if err := s.cleanup(ctx, olds); err != nil {
			return err
		}
	}
	return s.rolloutStatus(ctx, newRS, olds)
}

// oldPodsRunning says whether any pod of the old ReplicaSets is still there and not
// finished (terminating pods count: Recreate means no overlap).
func (s *syncState) oldPodsRunning(olds []*appsv1.ReplicaSet) (bool, error) {
	uids := map[types.UID]bool{}
	for _, rs := range olds {
		if rs.Status.Replicas > 0 {
			return true, nil
		}
		uids[rs.UID] = true
	}
	pods, err := s.c.podLister.Pods(s.d.Namespace).List(labels.Everything())
	if err != nil {
		return false, err
	}
	for _, p := range pods {
		ref := metav1.GetControllerOf(p)
		if ref == nil || !uids[ref.UID] {
			continue
		}
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			return true, nil
		}
	}
	return false, nil
}

// scaleOnly handles a paused Deployment or a change of replicas: resize without a new
// rollout step.
func (s *syncState) scaleOnly(ctx context.Context, rsList []*appsv1.ReplicaSet) error {
	newRS, olds, err := s.newAndOld(ctx, rsList, false)
	if err != nil {
		return err
	}
	d := s.d
	all := olds
	if newRS != nil {
		all = append([]*appsv1.ReplicaSet{newRS}, olds...)
	}
	var active []*appsv1.ReplicaSet
	for _, rs := range all {
		if specReplicas(rs) > 0 {
			active = append(active, rs)
		}
	}
	replace := func(updated *appsv1.ReplicaSet) {
		for i := range all {
			if all[i].UID == updated.UID {
				all[i] = updated
			}
		}
		if newRS != nil && newRS.UID == updated.UID {
			newRS = updated
		}
	}
	var target *appsv1.ReplicaSet
	switch {
	case len(active) == 1:
		target = active[0]
	case len(active) == 0 && newRS != nil:
		target = newRS
	case len(active) == 0 && len(olds) > 0:
		target = olds[0]
		for _, rs := range olds {
			if olderThan(target, rs) {
				target = rs
			}
		}
	}
	switch {
	case target != nil:
		updated, _, err := s.scale(ctx, target, replicasOf(d))
		if err != nil {
			return err
		}
		replace(updated)
	case newRS != nil && specReplicas(newRS) == replicasOf(d) && newRS.Status.AvailableReplicas == replicasOf(d):
		for _, rs := range olds {
			updated, _, err := s.scale(ctx, rs, 0)
			if err != nil {
				return err
			}
			replace(updated)
		}
	case d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType:
		sizes := proportionalScale(replicasOf(d)+maxSurgeOf(d), active, func(rs *appsv1.ReplicaSet) (int32, bool) {
			return annotatedInt(rs, MaxReplicasAnnotation)
		})
		for _, rs := range active {
			size, ok := sizes[rs.Name]
			if !ok {
				continue
			}
			updated, _, err := s.scale(ctx, rs, size)
			if err != nil {
				return err
			}
			replace(updated)
		}
	}
	if d.Spec.Paused {
		var oldOnly []*appsv1.ReplicaSet
		for _, rs := range all {
			if newRS == nil || rs.UID != newRS.UID {
				oldOnly = append(oldOnly, rs)
			}
		}
		if err := s.cleanup(ctx, oldOnly); err != nil {
			return err
		}
	}
	return s.statusOnly(ctx, all)
}

// cleanup deletes the old ReplicaSets beyond revisionHistoryLimit.
func (s *syncState) cleanup(ctx context.Context, olds []*appsv1.ReplicaSet) error {
	if s.d.Spec.RevisionHistoryLimit == nil {
		return nil
	}
	for _, rs := range historyToDelete(olds, *s.d.Spec.RevisionHistoryLimit) {
		err := s.c.client.AppsV1().ReplicaSets(rs.Namespace).Delete(ctx, rs.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &rs.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete old replicaset %s (revision %s): %w", rs.Name, rs.Annotations[RevisionAnnotation], err)
		}
	}
	return nil
}

// statusOnly writes the status without judging progress.
func (s *syncState) statusOnly(ctx context.Context, rsList []*appsv1.ReplicaSet) error {
	newRS, _ := split(s.d, rsList)
	st := computeStatus(s.d, newRS, rsList, s.c.cfg.Now())
	return s.writeStatus(ctx, st)
}

// rolloutStatus writes the status with the Progressing condition, and looks again
// when the progress deadline may pass.
func (s *syncState) rolloutStatus(ctx context.Context, newRS *appsv1.ReplicaSet, olds []*appsv1.ReplicaSet) error {
	all := olds
	if newRS != nil {
		all = append(append([]*appsv1.ReplicaSet(nil), olds...), newRS)
	}
	now := s.c.cfg.Now()
	st := computeStatus(s.d, newRS, all, now)
	if after := progressing(s.d, newRS, &st, now); after > 0 {
		s.c.queue.AddAfter(s.key, after)
	}
	return s.writeStatus(ctx, st)
}

func (s *syncState) writeStatus(ctx context.Context, st appsv1.DeploymentStatus) error {
	cached, err := s.c.dLister.Deployments(s.d.Namespace).Get(s.d.Name)
	if err == nil && cached.ResourceVersion == s.d.ResourceVersion && apiequality.Semantic.DeepEqual(cached.Status, st) {
		return nil
	}
	d := s.d.DeepCopy()
	d.Status = st
	out, err := s.c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("update status of deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	s.d = out
	return nil
}
