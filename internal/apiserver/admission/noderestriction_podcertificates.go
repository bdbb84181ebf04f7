package admission

import (
	"context"
	"fmt"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

var podCertificateRequestsResource = certificatesv1.Resource("podcertificaterequests")

// admitPodCertificateRequest: a node creates PodCertificateRequests only for itself
// (its name and UID), for a pod bound to it that is no mirror pod (its name and UID),
// as the pod's service account (its name and UID), and for a signer a podCertificate
// volume source of the pod names (or one the node may request for the account:
// verb request-serviceaccounts-podcertificate-signer on the signer's name with ":" for
// "/", named after the account). A mismatch of UIDs may be a cache that lags: it is
// an error the node retries, not a refusal.
func (p *nodeRestriction) admitPodCertificateRequest(ctx context.Context, node string, a admission.Attributes) error {
	if a.GetOperation() != admission.Create {
		return admission.NewForbidden(a, fmt.Errorf("unexpected operation %v", a.GetOperation()))
	}
	if a.GetSubresource() != "" {
		return admission.NewForbidden(a, fmt.Errorf("unexpected subresource %v", a.GetSubresource()))
	}
	req, ok := a.GetObject().(*certificatesv1.PodCertificateRequest)
	if !ok {
		return admission.NewForbidden(a, fmt.Errorf("unexpected type %T", a.GetObject()))
	}
	ns, spec := a.GetNamespace(), req.Spec
	podKey := ns + "/" + spec.PodName
	if string(spec.NodeName) != node {
		return admission.NewForbidden(a, fmt.Errorf("PodCertificateRequest.Spec.NodeName=%q, which is not the requesting node %q", spec.NodeName, node))
	}
	n, err := p.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return p.lookupError(a, apierrors.IsNotFound(err), fmt.Errorf("while retrieving node %q named in the PodCertificateRequest: %w", node, err))
	}
	if n.UID != spec.NodeUID {
		return fmt.Errorf("PodCertificateRequest for pod %q names node UID %q, inconsistent with the running node (%q)", podKey, spec.NodeUID, n.UID)
	}
	pod, err := p.pod(ctx, ns, spec.PodName)
	if err != nil {
		return p.lookupError(a, apierrors.IsNotFound(err), fmt.Errorf("while retrieving pod %q named in the PodCertificateRequest: %w", podKey, err))
	}
	if pod.UID != spec.PodUID {
		return fmt.Errorf("PodCertificateRequest for pod %q contains pod UID (%q) which differs from running pod %q", podKey, spec.PodUID, pod.UID)
	}
	if pod.Spec.NodeName != node {
		return admission.NewForbidden(a, fmt.Errorf("pod %q is not running on node %q named in the PodCertificateRequest", podKey, node))
	}
	if _, mirror := pod.Annotations[mirrorPodAnnotation]; mirror {
		return admission.NewForbidden(a, fmt.Errorf("pod %q is a mirror pod", podKey))
	}
	if spec.ServiceAccountName != pod.Spec.ServiceAccountName {
		return admission.NewForbidden(a, fmt.Errorf("PodCertificateRequest for pod %q contains serviceAccountName (%q) that differs from running pod (%q)",
			podKey, spec.ServiceAccountName, pod.Spec.ServiceAccountName))
	}
	sa, err := p.client.CoreV1().ServiceAccounts(ns).Get(ctx, spec.ServiceAccountName, metav1.GetOptions{})
	if err != nil {
		return p.lookupError(a, apierrors.IsNotFound(err), fmt.Errorf("while retrieving service account %q named in the PodCertificateRequest: %w", ns+"/"+spec.ServiceAccountName, err))
	}
	if sa.UID != spec.ServiceAccountUID {
		return fmt.Errorf("PodCertificateRequest for pod %q names service account UID %q, which differs from the running service account (%q)", podKey, spec.ServiceAccountUID, sa.UID)
	}
	if podProjectsCertificateOf(pod, spec.SignerName) {
		return nil
	}
	if p.authz != nil {
		d, _, err := p.authz.Authorize(ctx, authorizer.AttributesRecord{User: a.GetUserInfo(), Verb: "request-serviceaccounts-podcertificate-signer",
			APIGroup: a.GetResource().Group, APIVersion: a.GetResource().Version, Resource: strings.ReplaceAll(spec.SignerName, "/", ":"),
			Namespace: ns, Name: spec.ServiceAccountName, ResourceRequest: true})
		if d == authorizer.DecisionAllow {
			return nil
		}
		if err != nil {
			return admission.NewForbidden(a, fmt.Errorf("error authorizing %s to request podcertificaterequests for signer %q: %w", a.GetUserInfo().GetName(), spec.SignerName, err))
		}
	}
	return admission.NewForbidden(a, fmt.Errorf("pod %q does not mount a podCertificate projected volume for signer %q", podKey, spec.SignerName))
}

// lookupError is err as the node sees it: an object not found yet may be a cache that
// lags (retried), any other failure a refusal.
func (p *nodeRestriction) lookupError(a admission.Attributes, notFound bool, err error) error {
	if notFound {
		return err
	}
	return admission.NewForbidden(a, err)
}

// podProjectsCertificateOf says whether a podCertificate volume source of the pod
// names the signer.
func podProjectsCertificateOf(pod *corev1.Pod, signer string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.PodCertificate != nil && s.PodCertificate.SignerName == signer {
				return true
			}
		}
	}
	return false
}
