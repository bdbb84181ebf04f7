package podidentitywebhook

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"
)

// ConfigurationName and WebhookName are the MutatingWebhookConfiguration that sends pods
// to the webhook and its one webhook, named as on EKS.
const (
	ConfigurationName = "pod-identity-webhook"
	WebhookName       = "iam-for-pods.amazonaws.com"
)

// Configuration is the MutatingWebhookConfiguration that calls the webhook serving at
// addr (host:port) for every pod created, at https://<addr>/mutate verified with
// caBundle: failurePolicy
// Ignore, so that pods are created unmutated while it is down, as on EKS; no side
// effects; AdmissionReview v1 (or v1beta1).
func Configuration(addr string, caBundle []byte) *admissionregistrationv1.MutatingWebhookConfiguration {
	url := "https://" + addr + MutatePath
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
	cfg.Name = ConfigurationName
	cfg.Webhooks = []admissionregistrationv1.MutatingWebhook{{
		Name:         WebhookName,
		ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
				Resources: []string{"pods"}},
		}},
		FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1", "v1beta1"},
	}}
	return cfg
}
