package garbagecollector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// attemptDelete examines object uid: it deletes it when no live owner is left, drops
// references to owners that are gone, and finishes foreground deletions.
func (c *Controller) attemptDelete(ctx context.Context, uid types.UID) error {
	n := c.graph.get(uid)
	if n == nil {
		return nil
	}
	if n.deleting && !n.deletingDependents() {
		return nil
	}
	latest, err := c.metadata.Resource(n.gvr).Namespace(n.namespace).Get(ctx, n.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil // its delete event is on its way
	}
	if err != nil {
		return fmt.Errorf("get %s %s/%s: %w", n.gvr.Resource, n.namespace, n.name, err)
	}
	if latest.UID != uid {
		return nil
	}
	if latest.DeletionTimestamp != nil {
		if hasString(latest.Finalizers, metav1.FinalizerDeleteDependents) {
			return c.deletingDependents(ctx, n, latest)
		}
		return nil
	}
	refs := latest.OwnerReferences
	if len(refs) == 0 {
		return nil
	}
	states := map[types.UID]ownerState{}
	for _, r := range refs {
		st, err := c.ownerState(ctx, r, latest.Namespace)
		if err != nil {
			return err
		}
		states[r.UID] = st
	}
	has, deletingDeps := c.graph.hasDependents(uid)
	a := decide(refs, states, latest.Finalizers, has, deletingDeps)
	md := c.metadata.Resource(n.gvr).Namespace(n.namespace)
	if len(a.removeOwners) > 0 {
		var keep []metav1.OwnerReference
		for _, r := range refs {
			if !hasUID(a.removeOwners, r.UID) {
				keep = append(keep, r)
			}
		}
		slog.InfoContext(ctx, "garbage collector: removing references to owners that are gone",
			"resource", n.gvr.Resource, "namespace", n.namespace, "name", n.name, "owners", a.removeOwners)
		return c.patchOwners(ctx, n, latest.UID, latest.ResourceVersion, keep)
	}
	if len(a.unblockOwners) > 0 {
		refs = append([]metav1.OwnerReference(nil), refs...)
		for i := range refs {
			if hasUID(a.unblockOwners, refs[i].UID) {
				refs[i].BlockOwnerDeletion = ptr.To(false)
			}
		}
		if err := c.patchOwners(ctx, n, latest.UID, latest.ResourceVersion, refs); err != nil {
			return err
		}
		if latest, err = md.Get(ctx, n.name, metav1.GetOptions{}); err != nil {
			return ignoreNotFound(err)
		}
	}
	if !a.delete {
		return nil
	}
	slog.InfoContext(ctx, "garbage collector: deleting object whose owners are gone",
		"resource", n.gvr.Resource, "namespace", n.namespace, "name", n.name, "propagation", a.policy)
	err = md.Delete(ctx, n.name, metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &latest.UID, ResourceVersion: &latest.ResourceVersion},
		PropagationPolicy: &a.policy,
	})
	if apierrors.IsConflict(err) {
		return fmt.Errorf("%s %s/%s changed while being collected: %w", n.gvr.Resource, n.namespace, n.name, err)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s %s/%s: %w", n.gvr.Resource, n.namespace, n.name, err)
	}
	return nil
}

// deletingDependents handles an owner deleted in the foreground: its dependents are
// examined (and so deleted), and once no blocking dependent is left the
// foregroundDeletion finalizer goes.
func (c *Controller) deletingDependents(ctx context.Context, n *node, latest *metav1.PartialObjectMetadata) error {
	deps := c.graph.dependentsOf(n.uid)
	if len(blocking(n.uid, deps)) > 0 {
		for uid := range deps {
			c.attemptToDelete.Add(uid)
		}
		return nil
	}
	slog.InfoContext(ctx, "garbage collector: dependents gone, finishing foreground deletion",
		"resource", n.gvr.Resource, "namespace", n.namespace, "name", n.name)
	return c.removeFinalizer(ctx, n, latest, metav1.FinalizerDeleteDependents)
}

// orphan handles an owner deleted with propagationPolicy Orphan: its reference is
// removed from each dependent, then its orphan finalizer.
func (c *Controller) orphan(ctx context.Context, uid types.UID) error {
	n := c.graph.get(uid)
	if n == nil {
		return nil
	}
	latest, err := c.metadata.Resource(n.gvr).Namespace(n.namespace).Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		return ignoreNotFound(err)
	}
	if latest.UID != uid || latest.DeletionTimestamp == nil || !hasString(latest.Finalizers, metav1.FinalizerOrphanDependents) {
		return nil
	}
	var errs []error
	for dep := range c.graph.dependentsOf(uid) {
		d := c.graph.get(dep)
		if d == nil {
			continue
		}
		cur, err := c.metadata.Resource(d.gvr).Namespace(d.namespace).Get(ctx, d.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var keep []metav1.OwnerReference
		for _, r := range cur.OwnerReferences {
			if r.UID != uid {
				keep = append(keep, r)
			}
		}
		if len(keep) == len(cur.OwnerReferences) {
			continue
		}
		if err := c.patchOwners(ctx, d, cur.UID, cur.ResourceVersion, keep); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("orphan dependents of %s %s/%s: %w", n.gvr.Resource, n.namespace, n.name, err)
	}
	slog.InfoContext(ctx, "garbage collector: dependents orphaned", "resource", n.gvr.Resource, "namespace", n.namespace, "name", n.name)
	return c.removeFinalizer(ctx, n, latest, metav1.FinalizerOrphanDependents)
}

// ownerState finds out whether the owner ref names is alive, gone or waiting for its
// dependents: from the graph when it has the owner, else from the API server.
func (c *Controller) ownerState(ctx context.Context, ref metav1.OwnerReference, namespace string) (ownerState, error) {
	if o := c.graph.get(ref.UID); o != nil {
		if o.deletingDependents() {
			return ownerWaiting, nil
		}
		return ownerSolid, nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return ownerAbsent, nil // an owner that cannot exist
	}
	mapping, err := c.mapper.RESTMapping(gv.WithKind(ref.Kind).GroupKind(), gv.Version)
	if err != nil {
		c.mapper.Reset()
		return ownerSolid, fmt.Errorf("owner kind %s of %s: %w", ref.Kind, ref.APIVersion, err)
	}
	ns := ""
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if namespace == "" {
			return ownerAbsent, nil // a cluster-scoped object cannot have a namespaced owner
		}
		ns = namespace
	}
	owner, err := c.metadata.Resource(mapping.Resource).Namespace(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return ownerAbsent, nil
	case err != nil:
		return ownerSolid, fmt.Errorf("look up owner %s %s: %w", ref.Kind, ref.Name, err)
	case owner.UID != ref.UID:
		return ownerAbsent, nil
	case owner.DeletionTimestamp != nil && hasString(owner.Finalizers, metav1.FinalizerDeleteDependents):
		return ownerWaiting, nil
	}
	return ownerSolid, nil
}

// patchOwners sets the object's ownerReferences to refs if it is still at
// resourceVersion.
func (c *Controller) patchOwners(ctx context.Context, n *node, uid types.UID, resourceVersion string, refs []metav1.OwnerReference) error {
	var list interface{} = refs
	if len(refs) == 0 {
		list = nil
	}
	patch, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{
		"ownerReferences": list, "uid": uid, "resourceVersion": resourceVersion}})
	_, err := c.metadata.Resource(n.gvr).Namespace(n.namespace).Patch(ctx, n.name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patch ownerReferences of %s %s/%s: %w", n.gvr.Resource, n.namespace, n.name, err)
	}
	return nil
}

func (c *Controller) removeFinalizer(ctx context.Context, n *node, latest *metav1.PartialObjectMetadata, finalizer string) error {
	var keep []string
	for _, f := range latest.Finalizers {
		if f != finalizer {
			keep = append(keep, f)
		}
	}
	var list interface{} = keep
	if len(keep) == 0 {
		list = nil
	}
	patch, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{
		"finalizers": list, "uid": latest.UID, "resourceVersion": latest.ResourceVersion}})
	_, err := c.metadata.Resource(n.gvr).Namespace(n.namespace).Patch(ctx, n.name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer %s from %s %s/%s: %w", finalizer, n.gvr.Resource, n.namespace, n.name, err)
	}
	return nil
}

func hasUID(list []types.UID, uid types.UID) bool {
	for _, u := range list {
		if u == uid {
			return true
		}
	}
	return false
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
