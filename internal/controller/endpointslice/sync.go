package endpointslice

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

// sync brings the EndpointSlices and Endpoints of Service key up to date.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := c.svcLister.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// Slices are owned by the Service and go with it (garbage collector).
		c.tracker.Forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	if svc.Spec.Selector == nil || svc.DeletionTimestamp != nil {
		return nil // endpoints of selector-less Services are their users' business
	}
	pods, err := c.podLister.Pods(ns).List(labels.SelectorFromValidatedSet(svc.Spec.Selector))
	if err != nil {
		return err
	}
	zones := map[string]string{}
	if nodes, err := c.nodeLister.List(labels.Everything()); err == nil {
		for _, n := range nodes {
			zones[n.Name] = n.Labels[corev1.LabelTopologyZone]
		}
	}
	err = c.reconcileSlices(ctx, svc, desiredGroups(svc, pods, zones))
	if err != nil && !errors.Is(err, errStaleCache) && !worker.Gone(err) {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "FailedToUpdateEndpointSlices", "Error updating Endpoint Slices for Service %s: %v", key, err)
	}
	return err
}

// sliceLabels are the labels of svc's slices.
func sliceLabels(svc *corev1.Service) map[string]string {
	l := map[string]string{}
	for k, v := range svc.Labels {
		l[k] = v
	}
	l[discoveryv1.LabelServiceName] = svc.Name
	l[discoveryv1.LabelManagedBy] = ControllerName
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		l[corev1.IsHeadlessService] = ""
	} else {
		delete(l, corev1.IsHeadlessService)
	}
	return l
}

// reconcileSlices makes svc's managed slices hold groups: slices of the same address
// type and ports are reused in name order, the rest deleted.
func (c *Controller) reconcileSlices(ctx context.Context, svc *corev1.Service, groups []*group) error {
	existing, err := c.sliceLister.EndpointSlices(svc.Namespace).List(labels.SelectorFromSet(labels.Set{
		discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: ControllerName}))
	if err != nil {
		return err
	}
	key := svc.Namespace + "/" + svc.Name
	if c.tracker.Stale(key, existing) {
		return errStaleCache
	}
	byGroup := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range existing {
		if ref := metav1.GetControllerOf(s); ref != nil && ref.UID != svc.UID {
			continue // a previous Service of this name: its slices go with it
		}
		k := groupKey(s.AddressType, s.Ports)
		byGroup[k] = append(byGroup[k], s)
	}
	for _, list := range byGroup {
		sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	}
	want := sliceLabels(svc)
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	slices := c.client.DiscoveryV1().EndpointSlices(svc.Namespace)
	var errs []error
	if len(groups) == 0 {
		// A Service with no endpoints still gets one empty slice, as upstream.
		at := discoveryv1.AddressTypeIPv4
		for _, f := range svc.Spec.IPFamilies {
			if f == corev1.IPv6Protocol {
				at = discoveryv1.AddressTypeIPv6
			}
			break
		}
		groups = []*group{{addressType: at}}
	}
	for _, g := range groups {
		chunks := chunk(g.endpoints, c.cfg.MaxEndpointsPerSlice)
		if len(chunks) == 0 {
			chunks = [][]discoveryv1.Endpoint{nil}
		}
		have := byGroup[g.key()]
		delete(byGroup, g.key())
		for i, eps := range chunks {
			if i < len(have) {
				s := have[i]
				if apiequality.Semantic.DeepEqual(s.Endpoints, eps) && labels.Equals(s.Labels, want) {
					continue
				}
				s = s.DeepCopy()
				s.Endpoints, s.Labels = eps, want
				updated, err := slices.Update(ctx, s, metav1.UpdateOptions{})
				if err == nil {
					c.tracker.Wrote(key, updated, false)
				} else if !apierrors.IsNotFound(err) {
					errs = append(errs, fmt.Errorf("update endpointslice %s: %w", s.Name, err))
				}
				continue
			}
			s := &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{GenerateName: svc.Name + "-", Namespace: svc.Namespace, Labels: want,
					OwnerReferences: []metav1.OwnerReference{owner}},
				AddressType: g.addressType, Ports: g.ports, Endpoints: eps,
			}
			created, err := slices.Create(ctx, s, metav1.CreateOptions{})
			if err == nil {
				c.tracker.Wrote(key, created, false)
			} else if !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				errs = append(errs, fmt.Errorf("create endpointslice for %s: %w", svc.Name, err))
			}
		}
		for _, s := range have[min(len(have), len(chunks)):] {
			errs = append(errs, c.deleteSlice(ctx, key, s))
		}
	}
	for _, stale := range byGroup {
		for _, s := range stale {
			errs = append(errs, c.deleteSlice(ctx, key, s))
		}
	}
	return errors.Join(errs...)
}

// deleteSlice deletes one of the slices of Service key; one already gone is no error.
func (c *Controller) deleteSlice(ctx context.Context, key string, s *discoveryv1.EndpointSlice) error {
	err := c.client.DiscoveryV1().EndpointSlices(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete endpointslice %s: %w", s.Name, err)
	}
	if err == nil {
		c.tracker.Wrote(key, s, true)
	}
	return nil
}
