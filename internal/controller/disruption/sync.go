package disruption

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// sync brings the status of budget key up to date with its pods. When the budget
// cannot be computed, it writes a status that allows no disruption.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pdb, err := c.pdbLister.PodDisruptionBudgets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	err = c.trySync(ctx, key, pdb)
	if err == nil || apierrors.IsConflict(err) {
		return err // a conflict is a stale cache: retried without the fail-safe
	}
	c.cfg.Logger.ErrorContext(ctx, "failed to sync PodDisruptionBudget", "poddisruptionbudget", key, "err", err)
	return c.writeStatus(ctx, failSafeStatus(pdb, err))
}

func (c *Controller) trySync(ctx context.Context, key string, pdb *policyv1.PodDisruptionBudget) error {
	pods, err := c.podsOf(pdb)
	if err != nil {
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "NoPods", "Failed to get pods: %v", err)
		return err
	}
	if len(pods) == 0 {
		c.recorder.Eventf(pdb, corev1.EventTypeNormal, "NoPods", "No matching pods found")
	}
	expected, desired, unmanaged, err := expectedPods(pdb, pods, c.scales.find)
	if err != nil {
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "CalculateExpectedPodCountFailed", "Failed to calculate the number of expected pods: %v", err)
		return err
	}
	if len(unmanaged) > 0 {
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "UnmanagedPods", "Pods selected by this PodDisruptionBudget (selector: %v) were found "+
			"to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. "+
			"To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value.", pdb.Spec.Selector)
	}
	now := c.cfg.Now()
	disrupted, expired, recheck := liveDisruptions(pods, pdb.Status.DisruptedPods, now)
	for _, pod := range expired {
		c.recorder.Eventf(pod, corev1.EventTypeWarning, "NotDeleted", "Pod was expected by PDB %s/%s to be deleted but it wasn't", pdb.Namespace, pdb.Name)
	}
	updated, changed := computeStatus(pdb, countHealthy(pods, disrupted, now), desired, expected, disrupted)
	if changed {
		if err := c.writeStatus(ctx, updated); err != nil {
			return err
		}
	}
	if recheck != nil {
		c.queue.AddAfter(key, recheck.Sub(now))
	}
	return nil
}

// podsOf lists the pods the budget's selector matches (an empty selector matches every
// pod of the namespace).
func (c *Controller) podsOf(pdb *policyv1.PodDisruptionBudget) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		return nil, err
	}
	return c.podLister.Pods(pdb.Namespace).List(sel)
}

// writeStatus writes pdb's status once; a failure is retried by the queue.
func (c *Controller) writeStatus(ctx context.Context, pdb *policyv1.PodDisruptionBudget) error {
	if _, err := c.client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update status of poddisruptionbudget %s/%s: %w", pdb.Namespace, pdb.Name, err)
	}
	return nil
}

// syncStalePod sets the DisruptionTarget condition of pod key to False once it has
// been True for StalePodDisruptionTimeout without the pod being deleted: the eviction
// or preemption that set it did not happen.
func (c *Controller) syncStalePod(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := c.podLister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	now := c.cfg.Now()
	stale, after := staleDisruption(pod, now)
	if !stale {
		return nil
	}
	if after > 0 {
		c.staleQueue.AddAfter(key, after)
		return nil
	}
	if _, err := c.client.CoreV1().Pods(ns).UpdateStatus(ctx, withoutDisruption(pod, now), metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("reset DisruptionTarget of pod %s: %w", key, err)
	}
	c.cfg.Logger.InfoContext(ctx, "reset stale DisruptionTarget condition to False", "pod", key)
	return nil
}
