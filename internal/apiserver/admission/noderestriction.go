package admission

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/kubelab/kubelab/internal/apiserver/auth"
)

// mirrorPodAnnotation marks a pod a kubelet made from a static manifest.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// nodeRestriction is the admission step upstream calls NodeRestriction: a kubelet
// (system:node:<name>) may write only its own Node, Lease and CSINode, the status of
// pods bound to its node, mirror pods of its node, tokens bound to its pods, and
// PodCertificateRequests of its pods (noderestriction_podcertificates.go).
type nodeRestriction struct {
	*admission.Handler
	pods   corelisters.PodLister
	client kubernetes.Interface
	// authz answers what else a node may request pod certificates for.
	authz authorizer.Authorizer
}

var _ admission.ValidationInterface = (*nodeRestriction)(nil)

func newNodeRestriction(f informers.SharedInformerFactory, client kubernetes.Interface, authz authorizer.Authorizer) *nodeRestriction {
	inf := f.Core().V1().Pods()
	p := &nodeRestriction{Handler: admission.NewHandler(admission.Create, admission.Update, admission.Delete),
		pods: inf.Lister(), client: client, authz: authz}
	p.SetReadyFunc(inf.Informer().HasSynced)
	return p
}

var (
	podsResource     = corev1.Resource("pods")
	nodesResource    = corev1.Resource("nodes")
	saResource       = corev1.Resource("serviceaccounts")
	leasesResource   = coordinationv1.Resource("leases")
	csiNodesResource = storagev1.Resource("csinodes")
)

func (p *nodeRestriction) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	node, ok := auth.NodeIdentity(a.GetUserInfo())
	if !ok {
		return nil
	}
	if node == "" {
		return admission.NewForbidden(a, fmt.Errorf("could not determine node from user %q", a.GetUserInfo().GetName()))
	}
	var err error
	switch gr := a.GetResource().GroupResource(); {
	case gr == podCertificateRequestsResource:
		return p.admitPodCertificateRequest(ctx, node, a)
	case gr == podsResource:
		err = p.admitPod(ctx, node, a)
	case gr == nodesResource:
		if a.GetName() != node {
			err = fmt.Errorf("node %q is not allowed to modify node %q", node, a.GetName())
		}
	case gr == saResource && a.GetSubresource() == "token":
		err = p.admitToken(ctx, node, a)
	case gr == leasesResource:
		if a.GetName() != node {
			err = fmt.Errorf("can only access node lease with the same name as the requesting node")
		}
	case gr == csiNodesResource:
		if a.GetName() != node {
			err = fmt.Errorf("can only access CSINode with the same name as the requesting node")
		}
	}
	if err != nil {
		return admission.NewForbidden(a, err)
	}
	return nil
}

// admitPod: a node creates only mirror pods of itself, and updates the status of,
// evicts or deletes only pods bound to itself.
func (p *nodeRestriction) admitPod(ctx context.Context, node string, a admission.Attributes) error {
	switch {
	case a.GetOperation() == admission.Create && a.GetSubresource() == "":
		pod, ok := a.GetObject().(*corev1.Pod)
		if !ok {
			return fmt.Errorf("unexpected object %T", a.GetObject())
		}
		return mirrorPodRefused(node, pod)
	case a.GetSubresource() == "status" || a.GetSubresource() == "eviction" ||
		(a.GetOperation() == admission.Delete && a.GetSubresource() == ""):
		pod, ok := a.GetOldObject().(*corev1.Pod)
		if !ok {
			existing, err := p.pod(ctx, a.GetNamespace(), a.GetName())
			if err != nil {
				return fmt.Errorf("pod %s/%s: %w", a.GetNamespace(), a.GetName(), err)
			}
			pod = existing
		}
		if pod.Spec.NodeName != node {
			return fmt.Errorf("node %q can only %s pods with spec.nodeName set to itself", node, podVerb(a))
		}
		return nil
	}
	return fmt.Errorf("unexpected operation %s on pods/%s by node %q", a.GetOperation(), a.GetSubresource(), node)
}

// mirrorPodRefused says why node may not create pod, or nil: a node creates only mirror
// pods bound to itself, owned by its Node object alone (a controller reference without
// blockOwnerDeletion), that reference no other API object: no service account, secret,
// configMap or persistent volume claim.
func mirrorPodRefused(node string, pod *corev1.Pod) error {
	if _, mirror := pod.Annotations[mirrorPodAnnotation]; !mirror {
		return fmt.Errorf("pod does not have %q annotation, node %q can only create mirror pods", mirrorPodAnnotation, node)
	}
	if pod.Spec.NodeName != node {
		return fmt.Errorf("node %q can only create pods with spec.nodeName set to itself", node)
	}
	switch refs := pod.OwnerReferences; {
	case len(refs) > 1:
		return fmt.Errorf("node %q can only create pods with a single owner reference set to itself", node)
	case len(refs) == 0 || refs[0].APIVersion != "v1" || refs[0].Kind != "Node" || refs[0].Name != node:
		return fmt.Errorf("node %q can only create pods with an owner reference set to itself", node)
	case refs[0].Controller == nil || !*refs[0].Controller:
		return fmt.Errorf("node %q can only create pods with a controller owner reference set to itself", node)
	case refs[0].BlockOwnerDeletion != nil && *refs[0].BlockOwnerDeletion:
		return fmt.Errorf("node %q must not set blockOwnerDeletion on an owner reference", node)
	}
	if pod.Spec.ServiceAccountName != "" {
		return fmt.Errorf("node %q can not create pods that reference a service account", node)
	}
	secrets, configMaps, claims := podReferences(pod)
	switch {
	case secrets:
		return fmt.Errorf("node %q can not create pods that reference secrets", node)
	case configMaps:
		return fmt.Errorf("node %q can not create pods that reference configmaps", node)
	case claims:
		return fmt.Errorf("node %q can not create pods that reference persistentvolumeclaims", node)
	}
	return nil
}

// podReferences says whether pod names secrets (image pull secrets, volumes, projected
// sources, environment), configMaps (the same) or persistent volume claims (volumes,
// ephemeral volumes).
func podReferences(pod *corev1.Pod) (secrets, configMaps, claims bool) {
	secrets = len(pod.Spec.ImagePullSecrets) > 0
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.Secret != nil, v.AzureFile != nil, v.CephFS != nil && v.CephFS.SecretRef != nil,
			v.CSI != nil && v.CSI.NodePublishSecretRef != nil, v.FlexVolume != nil && v.FlexVolume.SecretRef != nil,
			v.ISCSI != nil && v.ISCSI.SecretRef != nil, v.RBD != nil && v.RBD.SecretRef != nil,
			v.ScaleIO != nil && v.ScaleIO.SecretRef != nil, v.StorageOS != nil && v.StorageOS.SecretRef != nil:
			secrets = true
		case v.ConfigMap != nil:
			configMaps = true
		case v.PersistentVolumeClaim != nil, v.Ephemeral != nil: // an ephemeral volume makes a claim
			claims = true
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				secrets = secrets || src.Secret != nil
				configMaps = configMaps || src.ConfigMap != nil
			}
		}
	}
	var containers []corev1.Container
	containers = append(containers, pod.Spec.InitContainers...)
	containers = append(containers, pod.Spec.Containers...)
	for _, e := range pod.Spec.EphemeralContainers {
		containers = append(containers, corev1.Container(e.EphemeralContainerCommon))
	}
	for _, c := range containers {
		for _, e := range c.EnvFrom {
			secrets = secrets || e.SecretRef != nil
			configMaps = configMaps || e.ConfigMapRef != nil
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil {
				secrets = secrets || e.ValueFrom.SecretKeyRef != nil
				configMaps = configMaps || e.ValueFrom.ConfigMapKeyRef != nil
			}
		}
	}
	return secrets, configMaps, claims
}

func podVerb(a admission.Attributes) string {
	switch a.GetSubresource() {
	case "status":
		return "update pod status for"
	case "eviction":
		return "evict"
	}
	return "delete"
}

// admitToken: a node asks only for tokens bound to a pod bound to itself.
func (p *nodeRestriction) admitToken(ctx context.Context, node string, a admission.Attributes) error {
	if a.GetOperation() != admission.Create {
		return nil
	}
	tr, ok := a.GetObject().(*authenticationv1.TokenRequest)
	if !ok {
		return fmt.Errorf("unexpected object %T", a.GetObject())
	}
	ref := tr.Spec.BoundObjectRef
	if ref == nil || ref.Kind != "Pod" {
		return fmt.Errorf("node requested token not bound to a pod")
	}
	pod, err := p.pod(ctx, a.GetNamespace(), ref.Name)
	if err != nil {
		return fmt.Errorf("node requested token bound to pod %s/%s: %w", a.GetNamespace(), ref.Name, err)
	}
	if ref.UID != "" && ref.UID != pod.UID {
		return fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record (%s)", ref.UID, pod.UID)
	}
	if pod.Spec.NodeName != node {
		return fmt.Errorf("node requested token bound to a pod scheduled on a different node")
	}
	return nil
}

// pod reads a pod from the informer, or from the API when the informer has not seen it
// yet (a pod created a moment ago).
func (p *nodeRestriction) pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	pod, err := p.pods.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return p.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	return pod, err
}
