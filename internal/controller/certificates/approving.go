package certificates

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// ApprovingComponentName is the approving controller's name, as upstream.
const ApprovingComponentName = "csrapproving-controller"

// AutoApproved is the reason of the Approved condition the controller adds.
const AutoApproved = "AutoApproved"

// ApprovingConfig tunes the approving controller.
type ApprovingConfig struct {
	// Workers is the number of requests looked at at once (5 when zero, as upstream).
	Workers int
	// Clock is the time source of the conditions and of the queue's delays (the real
	// clock when nil).
	Clock clock.WithTicker
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

// ApprovingController approves the kubelet client certificate requests whose requestor
// a SubjectAccessReview allows to ask for one.
type ApprovingController struct {
	*csrController
	cfg    ApprovingConfig
	client kubernetes.Interface
}

// recognizer is a kind of request the controller approves: the requests recognize holds
// for are approved, with successMessage, when the requestor may do permission.
type recognizer struct {
	recognize      func(csr *certificatesv1.CertificateSigningRequest, cr *x509.CertificateRequest) bool
	permission     authorizationv1.ResourceAttributes
	successMessage string
}

// recognizers are tried in order: a node renewing its own certificate, then any kubelet
// client certificate (a bootstrapper's).
var recognizers = []recognizer{
	{
		recognize: isSelfNodeClientCert,
		permission: authorizationv1.ResourceAttributes{Group: certificatesv1.GroupName, Resource: "certificatesigningrequests",
			Verb: "create", Subresource: "selfnodeclient"},
		successMessage: "Auto approving self kubelet client certificate after SubjectAccessReview.",
	},
	{
		recognize: isNodeClientCert,
		permission: authorizationv1.ResourceAttributes{Group: certificatesv1.GroupName, Resource: "certificatesigningrequests",
			Verb: "create", Subresource: "nodeclient"},
		successMessage: "Auto approving kubelet client certificate after SubjectAccessReview.",
	},
}

// NewApprovingController registers the controller's informer and handlers on factory;
// the caller starts the factory after every New.
func NewApprovingController(cfg ApprovingConfig, client kubernetes.Interface, factory informers.SharedInformerFactory) (*ApprovingController, error) {
	if cfg.Workers < 0 {
		return nil, fmt.Errorf("%s: workers %d < 0", ApprovingComponentName, cfg.Workers)
	}
	if cfg.Workers == 0 {
		cfg.Workers = 5
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &ApprovingController{cfg: cfg, client: client}
	var err error
	a.csrController, err = newCSRController(ApprovingComponentName, cfg.Workers, cfg.Clock, cfg.Logger, factory, a.handle)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// handle approves csr when a recognizer recognizes it and the requestor holds its
// permission. A recognized request not allowed is retried (the permission may be
// granted later) without an error log.
func (a *ApprovingController) handle(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	if approved, denied := approvalCondition(&csr.Status); approved || denied {
		return nil
	}
	cr, err := parseCSR(csr.Spec.Request)
	if err != nil {
		return fmt.Errorf("unable to parse csr %q: %w", csr.Name, err)
	}
	var tried []string
	for _, r := range recognized(csr, cr) {
		tried = append(tried, r.permission.Subresource)
		allowed, err := a.authorize(ctx, csr, r.permission)
		if err != nil {
			return err
		}
		if !allowed {
			continue
		}
		now := metav1.NewTime(a.cfg.Clock.Now())
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
			Reason: AutoApproved, Message: r.successMessage,
			LastUpdateTime: now, LastTransitionTime: now,
		})
		if _, err := a.client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("error updating approval for csr %q: %w", csr.Name, err)
		}
		a.cfg.Logger.InfoContext(ctx, "approved certificate signing request", "csr", csr.Name, "requestor", csr.Spec.Username, "as", r.permission.Subresource)
		return nil
	}
	if len(tried) > 0 {
		return ignorableError(fmt.Sprintf("recognized csr %q as %v but subject access review was not approved", csr.Name, tried))
	}
	return nil
}

// recognized are the recognizers that recognize csr, in order.
func recognized(csr *certificatesv1.CertificateSigningRequest, cr *x509.CertificateRequest) []recognizer {
	var out []recognizer
	for _, r := range recognizers {
		if r.recognize(csr, cr) {
			out = append(out, r)
		}
	}
	return out
}

// authorize asks the API server whether the requestor of csr may do rattrs.
func (a *ApprovingController) authorize(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, rattrs authorizationv1.ResourceAttributes) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: subjectAccessReviewSpec(csr, rattrs)}
	sar, err := a.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("subject access review for csr %q: %w", csr.Name, err)
	}
	return sar.Status.Allowed, nil
}

// subjectAccessReviewSpec asks whether the requestor recorded in csr may do rattrs.
func subjectAccessReviewSpec(csr *certificatesv1.CertificateSigningRequest, rattrs authorizationv1.ResourceAttributes) authorizationv1.SubjectAccessReviewSpec {
	var extra map[string]authorizationv1.ExtraValue
	for k, v := range csr.Spec.Extra {
		if extra == nil {
			extra = map[string]authorizationv1.ExtraValue{}
		}
		extra[k] = authorizationv1.ExtraValue(v)
	}
	return authorizationv1.SubjectAccessReviewSpec{
		User: csr.Spec.Username, UID: csr.Spec.UID, Groups: csr.Spec.Groups, Extra: extra,
		ResourceAttributes: &rattrs,
	}
}

// isNodeClientCert: a request of kubernetes.io/kube-apiserver-client-kubelet its signer
// would accept.
func isNodeClientCert(csr *certificatesv1.CertificateSigningRequest, cr *x509.CertificateRequest) bool {
	return csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName &&
		validateKubeletClient(cr, csr.Spec.Usages) == nil
}

// isSelfNodeClientCert: a node client certificate request of the node it names.
func isSelfNodeClientCert(csr *certificatesv1.CertificateSigningRequest, cr *x509.CertificateRequest) bool {
	return csr.Spec.Username == cr.Subject.CommonName && isNodeClientCert(csr, cr)
}
