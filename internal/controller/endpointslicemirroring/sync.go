package endpointslicemirroring

import (
	"context"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/util/worker"
)

// sync mirrors the Endpoints of key into slices, or deletes the slices mirrored for it
// when it is not to be mirrored (any more).
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	existing, err := c.sliceLister.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{
		discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: ControllerName}))
	if err != nil {
		return err
	}
	if c.tracker.Stale(key, existing) {
		return errStaleCache
	}
	ep, err := c.epLister.Endpoints(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err == nil && mirrored(ep) {
		svc, err := c.svcLister.Services(ns).Get(name)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err == nil && svc.Spec.Selector == nil {
			return c.reconcile(ctx, key, ep, existing)
		}
	}
	var errs []error
	for _, s := range existing {
		errs = append(errs, c.deleteSlice(ctx, key, s))
	}
	if len(existing) == 0 {
		c.tracker.Forget(key)
	}
	return errors.Join(errs...)
}

// reconcile makes the mirrored slices of ep hold what desiredGroups says: an existing
// slice of the same address type and ports is updated in place, the others deleted.
func (c *Controller) reconcile(ctx context.Context, key string, ep *corev1.Endpoints, existing []*discoveryv1.EndpointSlice) error {
	m := desiredGroups(ep, c.cfg.MaxEndpointsPerSubset)
	if m.invalid > 0 {
		c.recorder.Eventf(ep, corev1.EventTypeWarning, "InvalidIPAddress", "Skipped %d invalid IP addresses when mirroring to EndpointSlices", m.invalid)
	}
	if m.overCap > 0 {
		c.recorder.Eventf(ep, corev1.EventTypeWarning, "TooManyAddressesToMirror",
			"A max of %d addresses can be mirrored to EndpointSlices per Endpoints subset. %d addresses were skipped", c.cfg.MaxEndpointsPerSubset, m.overCap+m.invalid)
	}
	byKey := map[string][]*discoveryv1.EndpointSlice{}
	var errs []error
	for _, s := range existing {
		if ref := metav1.GetControllerOf(s); ref == nil || ref.UID != ep.UID {
			errs = append(errs, c.deleteSlice(ctx, key, s)) // mirrored from an earlier Endpoints of this name
			continue
		}
		k := groupKey(s.AddressType, s.Ports)
		byKey[k] = append(byKey[k], s)
	}
	for _, list := range byKey {
		sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	}
	wantLabels, wantAnnotations := sliceLabels(ep), sliceAnnotations(ep)
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Endpoints", Name: ep.Name, UID: ep.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	slices := c.client.DiscoveryV1().EndpointSlices(ep.Namespace)
	for _, g := range m.groups {
		have := byKey[g.key()]
		delete(byKey, g.key())
		if len(have) > 0 {
			for _, extra := range have[1:] {
				errs = append(errs, c.deleteSlice(ctx, key, extra))
			}
			s := have[0]
			if apiequality.Semantic.DeepEqual(s.Endpoints, g.endpoints) && labels.Equals(s.Labels, wantLabels) &&
				labels.Equals(s.Annotations, wantAnnotations) {
				continue
			}
			s = s.DeepCopy()
			s.Endpoints, s.Labels, s.Annotations = g.endpoints, wantLabels, wantAnnotations
			updated, err := slices.Update(ctx, s, metav1.UpdateOptions{})
			switch {
			case err == nil:
				c.tracker.Wrote(key, updated, false)
			case !apierrors.IsNotFound(err):
				errs = append(errs, fmt.Errorf("update endpointslice %s: %w", s.Name, err))
			}
			continue
		}
		s := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{GenerateName: ep.Name + "-", Namespace: ep.Namespace,
				Labels: wantLabels, Annotations: wantAnnotations, OwnerReferences: []metav1.OwnerReference{owner}},
			AddressType: g.addressType, Ports: g.ports, Endpoints: g.endpoints,
		}
		created, err := slices.Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("create endpointslice for %s: %w", key, err))
			continue
		}
		c.tracker.Wrote(key, created, false)
	}
	for _, stale := range byKey {
		for _, s := range stale {
			errs = append(errs, c.deleteSlice(ctx, key, s))
		}
	}
	err := errors.Join(errs...)
	if err != nil && !worker.Gone(err) {
		c.recorder.Eventf(ep, corev1.EventTypeWarning, "FailedToUpdateEndpointSlices", "Error updating Endpoint Slices for Endpoints %s: %v", key, err)
	}
	return err
}

// deleteSlice deletes one mirrored slice of key; one already gone is no error.
func (c *Controller) deleteSlice(ctx context.Context, key string, s *discoveryv1.EndpointSlice) error {
	err := c.client.DiscoveryV1().EndpointSlices(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete endpointslice %s: %w", s.Name, err)
	}
	if err == nil {
		c.tracker.Wrote(key, s, true)
	}
	return nil
}
