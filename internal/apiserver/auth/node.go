package auth

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/informers"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
)

// NodeUserPrefix starts the user name of a kubelet: system:node:<node name>, in the
// group system:nodes.
const NodeUserPrefix = "system:node:"

// NodeIdentity returns the node a user is the kubelet of, and whether it is one.
func NodeIdentity(u user.Info) (string, bool) {
	if u == nil || !strings.HasPrefix(u.GetName(), NodeUserPrefix) || !contains(u.GetGroups(), user.NodesGroup) {
		return "", false
	}
	return strings.TrimPrefix(u.GetName(), NodeUserPrefix), true
}

// byNodeName indexes pods by spec.nodeName.
const byNodeName = "spec.nodeName"

// Node is the authorizer of kubelets (users system:node:<name> in system:nodes): a
// kubelet may do what the system:node role allows, but may read a Secret, ConfigMap,
// PersistentVolumeClaim or PersistentVolume only when a pod bound to its node uses it,
// a VolumeAttachment only of its node, a service account's token only for a service
// account a pod on its node runs as, a Lease or CSINode only of its own name, and
// PodCertificateRequests only of its node (nodepodcertificates.go).
// Writes to Nodes and pods are narrowed further at admission (NodeRestriction). Other
// users get no opinion.
type Node struct {
	pods        cache.Indexer
	claims      corelisters.PersistentVolumeClaimLister
	volumes     corelisters.PersistentVolumeLister
	attachments storagelisters.VolumeAttachmentLister
	// podCertificateRequests are read for a kubelet's get of one.
	podCertificateRequests certlisters.PodCertificateRequestLister
	rules                  []rbacv1.PolicyRule
}

var _ authorizer.Authorizer = (*Node)(nil)

// NewNode registers its informers on f; the caller starts f.
func NewNode(f informers.SharedInformerFactory) (*Node, error) {
	pods := f.Core().V1().Pods().Informer()
	err := pods.AddIndexers(cache.Indexers{byNodeName: func(obj interface{}) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("node authorizer: %w", err)
	}
	return &Node{pods: pods.GetIndexer(), claims: f.Core().V1().PersistentVolumeClaims().Lister(),
		volumes: f.Core().V1().PersistentVolumes().Lister(), attachments: f.Storage().V1().VolumeAttachments().Lister(),
		podCertificateRequests: f.Certificates().V1().PodCertificateRequests().Lister(),
		rules:                  rules(nodeRules()...)}, nil
}

// Authorize decides for kubelets; NoOpinion for everyone else.
func (n *Node) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	node, ok := NodeIdentity(a.GetUser())
	if !ok {
		return authorizer.DecisionNoOpinion, "", nil
	}
	if node == "" {
		return authorizer.DecisionNoOpinion, "unknown node for user " + a.GetUser().GetName(), nil
	}
	if a.IsResourceRequest() {
		if d, reason, decided := n.authorizeObject(node, a); decided {
			return d, reason, nil
		}
	}
	if RulesAllow(a, n.rules...) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// ConditionsAwareAuthorize: the Node authorizer decides without conditions.
func (n *Node) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(n.Authorize(ctx, a))
}

// EvaluateConditions: the Node authorizer never returns conditions.
func (n *Node) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// authorizeObject decides the requests on objects a node may touch only through its
// pods; decided is false for the rest, which the node rules decide.
func (n *Node) authorizeObject(node string, a authorizer.Attributes) (authorizer.Decision, string, bool) {
	group, resource, sub := a.GetAPIGroup(), a.GetResource(), a.GetSubresource()
	switch {
	case group == "" && sub == "" && (resource == "secrets" || resource == "configmaps"):
		return n.decide(node, a, []string{"get", "list", "watch"}, func(p *corev1.Pod) bool {
			if resource == "secrets" {
				return podSecrets(p)[a.GetName()] || n.volumeSecretOf(p, a.GetNamespace()+"/"+a.GetName())
			}
			return podConfigMaps(p)[a.GetName()]
		})
	case group == "" && sub == "" && resource == "persistentvolumeclaims":
		return n.decide(node, a, []string{"get"}, func(p *corev1.Pod) bool { return podClaims(p)[a.GetName()] })
	case group == "" && sub == "status" && resource == "persistentvolumeclaims":
		return n.decide(node, a, []string{"update", "patch"}, func(p *corev1.Pod) bool { return podClaims(p)[a.GetName()] })
	case group == "" && sub == "" && resource == "persistentvolumes":
		return n.decideVolume(node, a)
	case group == "" && sub == "token" && resource == "serviceaccounts":
		return n.decide(node, a, []string{"create"}, func(p *corev1.Pod) bool { return p.Spec.ServiceAccountName == a.GetName() })
	case group == "" && sub == "" && resource == "serviceaccounts":
		return n.decide(node, a, []string{"get"}, func(p *corev1.Pod) bool { return p.Spec.ServiceAccountName == a.GetName() })
	case group == "storage.k8s.io" && resource == "volumeattachments":
		if a.GetVerb() != "get" || a.GetName() == "" {
			return deny("can only get individual volumeattachments")
		}
		va, err := n.attachments.Get(a.GetName())
		if err != nil || va.Spec.NodeName != node {
			return deny(fmt.Sprintf("no relationship found between node %q and this object", node))
		}
		return authorizer.DecisionAllow, "", true
	case group == "coordination.k8s.io" && resource == "leases":
		if a.GetNamespace() != corev1.NamespaceNodeLease {
			return deny("can only access leases in the " + corev1.NamespaceNodeLease + " namespace")
		}
		return ownName(node, a, "leases")
	case group == "storage.k8s.io" && resource == "csinodes":
		return ownName(node, a, "csinodes")
	case group == certsGroup && resource == "podcertificaterequests":
		return n.decidePodCertificateRequest(node, a)
	}
	return authorizer.DecisionNoOpinion, "", false
}

// decide allows one of verbs on the named object when a pod of node in its namespace
// uses it (uses reports that).
func (n *Node) decide(node string, a authorizer.Attributes, verbs []string, uses func(*corev1.Pod) bool) (authorizer.Decision, string, bool) {
	if !contains(verbs, a.GetVerb()) {
		return deny(fmt.Sprintf("can only %s individual %s", strings.Join(verbs, "/"), a.GetResource()))
	}
	if a.GetName() == "" {
		return deny("no object name found: a node can only " + strings.Join(verbs, "/") + " named " + a.GetResource())
	}
	for _, p := range n.podsOn(node) {
		if p.Namespace == a.GetNamespace() && uses(p) {
			return authorizer.DecisionAllow, "", true
		}
	}
	return deny(fmt.Sprintf("no relationship found between node %q and this object", node))
}

// decideVolume allows get of a PersistentVolume bound to a claim a pod of node uses.
func (n *Node) decideVolume(node string, a authorizer.Attributes) (authorizer.Decision, string, bool) {
	if a.GetVerb() != "get" || a.GetName() == "" {
		return deny("can only get individual persistentvolumes")
	}
	for _, p := range n.podsOn(node) {
		for claim := range podClaims(p) {
			if c, err := n.claims.PersistentVolumeClaims(p.Namespace).Get(claim); err == nil && c.Spec.VolumeName == a.GetName() {
				return authorizer.DecisionAllow, "", true
			}
		}
	}
	return deny(fmt.Sprintf("no relationship found between node %q and this object", node))
}

// volumeSecretOf reports whether a PersistentVolume a pod mounts names the Secret
// namespace/name for its node operations.
func (n *Node) volumeSecretOf(p *corev1.Pod, secret string) bool {
	for claim := range podClaims(p) {
		c, err := n.claims.PersistentVolumeClaims(p.Namespace).Get(claim)
		if err != nil || c.Spec.VolumeName == "" {
			continue
		}
		if pv, err := n.volumes.Get(c.Spec.VolumeName); err == nil && pvSecrets(pv)[secret] {
			return true
		}
	}
	return false
}

func (n *Node) podsOn(node string) []*corev1.Pod {
	objs, err := n.pods.ByIndex(byNodeName, node)
	if err != nil {
		return nil
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		pods = append(pods, o.(*corev1.Pod))
	}
	return pods
}

// ownName lets a node create an object (its name is checked at admission) or act on
// the one named after it.
func ownName(node string, a authorizer.Attributes, resource string) (authorizer.Decision, string, bool) {
	switch {
	case !contains([]string{"get", "create", "update", "patch", "delete"}, a.GetVerb()):
		return deny("can only get, create, update, patch or delete " + resource)
	case a.GetVerb() != "create" && a.GetName() != node:
		return deny(fmt.Sprintf("can only access %s named %q", resource, node))
	}
	return authorizer.DecisionAllow, "", true
}

// deny answers no opinion with its reason, and decided, so that the node rules are not
// consulted: only a role a cluster's owner bound to the node (RBAC, next) could still
// allow the request.
func deny(reason string) (authorizer.Decision, string, bool) {
	return authorizer.DecisionNoOpinion, reason, true
}
