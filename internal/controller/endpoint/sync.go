package endpoint

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/kubelab/kubelab/internal/util/worker"
)

// sync brings the Endpoints of Service key up to date, or deletes the ones this
// controller wrote for a Service that is gone.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := c.svcLister.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.triggers.forget(key)
		return c.deleteOwn(ctx, ns, name)
	}
	if err != nil {
		return err
	}
	if svc.Spec.Selector == nil || svc.Spec.Type == corev1.ServiceTypeExternalName || svc.DeletionTimestamp != nil {
		return nil // endpoints of selector-less Services are their users' business
	}
	pods, err := c.podLister.Pods(ns).List(labels.SelectorFromValidatedSet(svc.Spec.Selector))
	if err != nil {
		return err
	}
	// Observed on every sync, written or not, so the next one compares with now.
	triggered := c.triggers.observe(key, svc, pods)
	subsets, over := truncate(desiredSubsets(svc, pods), MaxAddresses)
	want := desiredLabels(svc)

	cur, err := c.epLister.Endpoints(ns).Get(name)
	create := apierrors.IsNotFound(err)
	switch {
	case create:
		cur = &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	case err != nil:
		return err
	case upToDate(cur, subsets, want, over):
		return nil
	}
	ep := cur.DeepCopy()
	ep.Subsets, ep.Labels = subsets, want
	if ep.Annotations == nil {
		ep.Annotations = map[string]string{}
	}
	if triggered.IsZero() {
		delete(ep.Annotations, corev1.EndpointsLastChangeTriggerTime)
	} else {
		ep.Annotations[corev1.EndpointsLastChangeTriggerTime] = triggered.UTC().Format(time.RFC3339Nano)
	}
	if over {
		ep.Annotations[corev1.EndpointsOverCapacity] = truncated
	} else {
		delete(ep.Annotations, corev1.EndpointsOverCapacity)
	}
	client := c.client.CoreV1().Endpoints(ns)
	if create {
		_, err = client.Create(ctx, ep, metav1.CreateOptions{})
	} else {
		_, err = client.Update(ctx, ep, metav1.UpdateOptions{})
	}
	switch {
	case err == nil:
		return nil
	case worker.Gone(err), apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		// The namespace is going, or the cache is behind the API server: no Event.
	case create:
		c.recorder.Eventf(ep, corev1.EventTypeWarning, "FailedToCreateEndpoint", "Failed to create endpoint for service %s/%s: %v", ns, name, err)
	default:
		c.recorder.Eventf(ep, corev1.EventTypeWarning, "FailedToUpdateEndpoint", "Failed to update endpoint %s/%s: %v", ns, name, err)
	}
	if create {
		return fmt.Errorf("create endpoints %s: %w", key, err)
	}
	return fmt.Errorf("update endpoints %s: %w", key, err)
}

// deleteOwn deletes the Endpoints ns/name if this controller wrote it.
func (c *Controller) deleteOwn(ctx context.Context, ns, name string) error {
	ep, err := c.epLister.Endpoints(ns).Get(name)
	if err != nil || ep.Labels[ManagedByLabel] != ControllerName {
		return nil
	}
	err = c.client.CoreV1().Endpoints(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &ep.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete endpoints %s/%s: %w", ns, name, err)
	}
	return nil
}
