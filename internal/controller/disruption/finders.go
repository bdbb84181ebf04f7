package disruption

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/ptr"
)

// scaleListers read the scale of the workload controllers from the informers' caches:
// ReplicationControllers, Deployments (through their ReplicaSets), ReplicaSets without
// a Deployment and StatefulSets. Other controllers, which upstream reads through their
// scale subresource, are not found.
type scaleListers struct {
	rcs          corelisters.ReplicationControllerLister
	deployments  appslisters.DeploymentLister
	replicaSets  appslisters.ReplicaSetLister
	statefulSets appslisters.StatefulSetLister
}

// find is the scaleFinder of the listers: it tries each kind in upstream's order.
func (l scaleListers) find(ref *metav1.OwnerReference, namespace string) (*scale, error) {
	for _, f := range []scaleFinder{l.replicationController, l.deployment, l.replicaSet, l.statefulSet} {
		s, err := f(ref, namespace)
		if err != nil || s != nil {
			return s, err
		}
	}
	return nil, nil
}

// isKind says whether ref names kind in one of groups.
func isKind(ref *metav1.OwnerReference, kind string, groups ...string) (bool, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false, err
	}
	return ref.Kind == kind && slices.Contains(groups, gv.Group), nil
}

func (l scaleListers) replicationController(ref *metav1.OwnerReference, namespace string) (*scale, error) {
	if ok, err := isKind(ref, "ReplicationController", ""); !ok || err != nil {
		return nil, err
	}
	rc, err := l.rcs.ReplicationControllers(namespace).Get(ref.Name)
	if err != nil || rc.UID != ref.UID {
		return nil, nil // not found: not this kind
	}
	return &scale{uid: rc.UID, replicas: ptr.Deref(rc.Spec.Replicas, 1)}, nil
}

func (l scaleListers) deployment(ref *metav1.OwnerReference, namespace string) (*scale, error) {
	if ok, err := isKind(ref, "ReplicaSet", "apps", "extensions"); !ok || err != nil {
		return nil, err
	}
	rs, err := l.replicaSets.ReplicaSets(namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return nil, nil
	}
	owner := metav1.GetControllerOf(rs)
	if owner == nil {
		return nil, nil
	}
	if ok, err := isKind(owner, "Deployment", "apps", "extensions"); !ok || err != nil {
		return nil, err
	}
	d, err := l.deployments.Deployments(namespace).Get(owner.Name)
	if err != nil || d.UID != owner.UID {
		return nil, nil
	}
	return &scale{uid: d.UID, replicas: ptr.Deref(d.Spec.Replicas, 1)}, nil
}

func (l scaleListers) replicaSet(ref *metav1.OwnerReference, namespace string) (*scale, error) {
	if ok, err := isKind(ref, "ReplicaSet", "apps", "extensions"); !ok || err != nil {
		return nil, err
	}
	rs, err := l.replicaSets.ReplicaSets(namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return nil, nil
	}
	if owner := metav1.GetControllerOf(rs); owner != nil && owner.Kind == "Deployment" {
		return nil, nil // the Deployment's scale counts, not the ReplicaSet's
	}
	return &scale{uid: rs.UID, replicas: ptr.Deref(rs.Spec.Replicas, 1)}, nil
}

func (l scaleListers) statefulSet(ref *metav1.OwnerReference, namespace string) (*scale, error) {
	if ok, err := isKind(ref, "StatefulSet", "apps"); !ok || err != nil {
		return nil, err
	}
	ss, err := l.statefulSets.StatefulSets(namespace).Get(ref.Name)
	if err != nil || ss.UID != ref.UID {
		return nil, nil
	}
	return &scale{uid: ss.UID, replicas: ptr.Deref(ss.Spec.Replicas, 1)}, nil
}
