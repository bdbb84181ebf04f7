package replicaset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/util/podutil"
)

// sync brings the pods of ReplicaSet key to its spec and writes its status.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	rs, err := c.workload.Objects.Get(ns, name)
	if apierrors.IsNotFound(err) {
		c.expectations.Forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	selector, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil || rs.Spec.Selector == nil {
		return nil // invalid selectors are refused by the API server; nothing to do
	}
	needsSync := c.expectations.Satisfied(key)
	all, err := c.podLister.Pods(ns).List(labels.Everything())
	if err != nil {
		return err
	}
	owned, err := c.claimPods(ctx, rs, selector, all)
	if err != nil {
		return err
	}
	var active []*corev1.Pod
	for _, p := range owned {
		if podActive(p) {
			active = append(active, p)
		}
	}
	var manageErr error
	if needsSync && rs.DeletionTimestamp == nil {
		var deleted []*corev1.Pod
		deleted, manageErr = c.manageReplicas(ctx, rs, key, active)
		// Pods just deleted no longer count, even before the informer says so: a
		// Deployment reading this status must not believe they are still available.
		active = without(active, deleted)
	}
	status := computeStatus(rs, active, manageErr, c.cfg.Now())
	if err := c.updateStatus(ctx, rs, status); err != nil {
		return err
	}
	if manageErr == nil && rs.Spec.MinReadySeconds > 0 && status.ReadyReplicas != status.AvailableReplicas {
		c.queue.AddAfter(key, time.Duration(rs.Spec.MinReadySeconds)*time.Second)
	}
	return manageErr
}

// claimPods returns the pods rs controls after adopting the matching orphans and
// releasing the owned pods that no longer match.
func (c *Controller) claimPods(ctx context.Context, rs *appsv1.ReplicaSet, selector labels.Selector, all []*corev1.Pod) ([]*corev1.Pod, error) {
	var owned []*corev1.Pod
	var errs []error
	for _, pod := range all {
		ref := metav1.GetControllerOf(pod)
		matches := selector.Matches(labels.Set(pod.Labels))
		switch {
		case ref != nil && ref.UID == rs.UID:
			if matches {
				owned = append(owned, pod)
				continue
			}
			if rs.DeletionTimestamp != nil {
				continue
			}
			if err := c.release(ctx, rs, pod); err != nil {
				errs = append(errs, err)
			}
		case ref == nil && matches && rs.DeletionTimestamp == nil && pod.DeletionTimestamp == nil:
			adopted, err := c.adopt(ctx, rs, pod)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if adopted != nil {
				owned = append(owned, adopted)
			}
		}
	}
	return owned, errors.Join(errs...)
}

// adopt makes rs the controller of pod, after checking with the API server that rs is
// still there and not being deleted (the cache may be stale).
func (c *Controller) adopt(ctx context.Context, rs *appsv1.ReplicaSet, pod *corev1.Pod) (*corev1.Pod, error) {
	fresh, err := c.workload.Objects.GetLive(ctx, rs.Namespace, rs.Name)
	if err != nil || fresh.UID != rs.UID || fresh.DeletionTimestamp != nil {
		return nil, nil
	}
	patch, _ := json.Marshal(map[string]interface{}{
		"metadata": map[string]interface{}{
			"ownerReferences": []metav1.OwnerReference{*c.controllerRef(rs)},
			"uid":             pod.UID,
		},
	})
	out, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsInvalid(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("adopt pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return out, nil
}

// release removes rs's ownerReference from pod.
func (c *Controller) release(ctx context.Context, rs *appsv1.ReplicaSet, pod *corev1.Pod) error {
	patch := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"$patch":"delete","uid":%q}],"uid":%q}}`, rs.UID, pod.UID)
	_, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsInvalid(err) {
		return fmt.Errorf("release pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// controllerRef is the ownerReference pods of rs carry.
func (c *Controller) controllerRef(rs *appsv1.ReplicaSet) *metav1.OwnerReference {
	return &metav1.OwnerReference{
		APIVersion: c.workload.Kind.GroupVersion().String(), Kind: c.workload.Kind.Kind,
		Name: rs.Name, UID: rs.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
}

// replicaDiff is how many pods to create (> 0) or delete (< 0), at most burst.
func replicaDiff(desired int32, active, burst int) int {
	diff := int(desired) - active
	if diff > burst {
		return burst
	}
	if diff < -burst {
		return -burst
	}
	return diff
}

// slowStartBatches splits n creations into batches of 1, 2, 4, … so that a failing
// create (quota, admission) costs few calls.
func slowStartBatches(n int) []int {
	var out []int
	for size := 1; n > 0; size *= 2 {
		b := min(size, n)
		out = append(out, b)
		n -= b
	}
	return out
}

// without returns pods minus gone.
func without(pods, gone []*corev1.Pod) []*corev1.Pod {
	if len(gone) == 0 {
		return pods
	}
	skip := map[*corev1.Pod]bool{}
	for _, p := range gone {
		skip[p] = true
	}
	var out []*corev1.Pod
	for _, p := range pods {
		if !skip[p] {
			out = append(out, p)
		}
	}
	return out
}

// manageReplicas creates or deletes pods so that rs has spec.replicas active pods; it
// returns the pods it asked to delete.
func (c *Controller) manageReplicas(ctx context.Context, rs *appsv1.ReplicaSet, key string, active []*corev1.Pod) ([]*corev1.Pod, error) {
	diff := replicaDiff(ptr.Deref(rs.Spec.Replicas, 1), len(active), c.cfg.BurstReplicas)
	switch {
	case diff > 0:
		c.expectations.Expect(key, diff, nil)
		created := 0
		for _, batch := range slowStartBatches(diff) {
			errs := make([]error, batch)
			var wg sync.WaitGroup
			for i := 0; i < batch; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					errs[i] = c.createPod(ctx, rs)
				}(i)
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					c.expectations.Created(key) // will not be seen
				}
			}
			created += batch
			if err := errors.Join(errs...); err != nil {
				for i := created; i < diff; i++ {
					c.expectations.Created(key) // never to be created in this pass
				}
				return nil, err
			}
		}
	case diff < 0:
		victims := podsToDelete(active, -diff)
		keys := make([]string, len(victims))
		for i, p := range victims {
			keys[i] = p.Namespace + "/" + p.Name
		}
		c.expectations.Expect(key, 0, keys)
		errs := make([]error, len(victims))
		var wg sync.WaitGroup
		for i, p := range victims {
			wg.Add(1)
			go func(i int, p *corev1.Pod) {
				defer wg.Done()
				err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
				switch {
				case err == nil:
					c.recorder.Eventf(c.reference(rs), corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", p.Name)
				case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
					c.expectations.Deleted(key, keys[i])
				default:
					c.expectations.Deleted(key, keys[i])
					c.recorder.Eventf(c.reference(rs), corev1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
					errs[i] = fmt.Errorf("delete pod %s: %w", keys[i], err)
				}
			}(i, p)
		}
		wg.Wait()
		return victims, errors.Join(errs...)
	}
	return nil, nil
}

// podFromTemplate is the pod rs creates: its template, generateName "<rs>-" and the
// controller ownerReference ref.
func podFromTemplate(rs *appsv1.ReplicaSet, ref *metav1.OwnerReference) *corev1.Pod {
	t := rs.Spec.Template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    rs.Name + "-",
			Namespace:       rs.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*ref},
		},
		Spec: t.Spec,
	}
	return pod
}

func (c *Controller) createPod(ctx context.Context, rs *appsv1.ReplicaSet) error {
	pod, err := c.client.CoreV1().Pods(rs.Namespace).Create(ctx, podFromTemplate(rs, c.controllerRef(rs)), metav1.CreateOptions{})
	if err != nil {
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil
		}
		c.recorder.Eventf(c.reference(rs), corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
		return fmt.Errorf("create pod for %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	c.recorder.Eventf(c.reference(rs), corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %s", pod.Name)
	return nil
}

// computeStatus is rs's status for its active pods at now.
func computeStatus(rs *appsv1.ReplicaSet, active []*corev1.Pod, manageErr error, now time.Time) appsv1.ReplicaSetStatus {
	st := rs.Status.DeepCopy()
	st.Replicas = int32(len(active))
	st.FullyLabeledReplicas, st.ReadyReplicas, st.AvailableReplicas = 0, 0, 0
	templateLabels := labels.Set(rs.Spec.Template.Labels).AsSelectorPreValidated()
	minReady := time.Duration(rs.Spec.MinReadySeconds) * time.Second
	for _, p := range active {
		if templateLabels.Matches(labels.Set(p.Labels)) {
			st.FullyLabeledReplicas++
		}
		if podutils.IsPodReady(p) {
			st.ReadyReplicas++
			if podutil.IsAvailable(p, minReady, now) {
				st.AvailableReplicas++
			}
		}
	}
	st.ObservedGeneration = rs.Generation
	var conds []appsv1.ReplicaSetCondition
	for _, cond := range st.Conditions {
		if cond.Type != appsv1.ReplicaSetReplicaFailure {
			conds = append(conds, cond)
		}
	}
	if manageErr != nil && ptr.Deref(rs.Spec.Replicas, 1) > int32(len(active)) {
		reason, msg := "FailedCreate", manageErr.Error()
		conds = append(conds, appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now), Reason: reason, Message: msg})
	}
	st.Conditions = conds
	return *st
}

func (c *Controller) updateStatus(ctx context.Context, rs *appsv1.ReplicaSet, status appsv1.ReplicaSetStatus) error {
	if statusEqual(rs.Status, status) {
		return nil
	}
	rs = rs.DeepCopy()
	rs.Status = status
	err := c.workload.Objects.UpdateStatus(ctx, rs)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("update status of %s %s/%s: %w", strings.ToLower(c.workload.Kind.Kind), rs.Namespace, rs.Name, err)
	}
	return nil
}

func statusEqual(a, b appsv1.ReplicaSetStatus) bool {
	if a.Replicas != b.Replicas || a.FullyLabeledReplicas != b.FullyLabeledReplicas || a.ReadyReplicas != b.ReadyReplicas ||
		a.AvailableReplicas != b.AvailableReplicas || a.ObservedGeneration != b.ObservedGeneration || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		if a.Conditions[i].Type != b.Conditions[i].Type || a.Conditions[i].Status != b.Conditions[i].Status || a.Conditions[i].Message != b.Conditions[i].Message {
			return false
		}
	}
	return true
}
