package certificates

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// SigningComponentName is the signing controller's name, as upstream.
const SigningComponentName = "csrsigning-controller"

// SignerValidationFailure is the reason of the Failed condition of a request its signer
// refuses.
const SignerValidationFailure = "SignerValidationFailure"

const (
	// DefaultSigningDuration is the longest validity of a signed certificate unless
	// Config says otherwise (kube-controller-manager's --cluster-signing-duration).
	DefaultSigningDuration = 365 * 24 * time.Hour
	// minSigningDuration is the shortest validity given, whatever expirationSeconds asks.
	minSigningDuration = 10 * time.Minute
	// backdate is how long before signing a certificate starts; certificates shorter
	// than shortLived end exactly their duration after signing, longer ones backdate
	// their end too.
	backdate   = 5 * time.Minute
	shortLived = 8 * time.Hour
)

// SigningConfig configures the signing controller. The CA is given as PEM (CACert,
// CAKey) or as files (CACertFile, CAKeyFile), read once by New.
type SigningConfig struct {
	CACert, CAKey         []byte
	CACertFile, CAKeyFile string
	// Duration is the longest validity of a certificate (DefaultSigningDuration when
	// zero); a request's spec.expirationSeconds shortens it, down to 10 minutes.
	Duration time.Duration
	// Workers is the number of requests signed at once (5 when zero, as upstream).
	Workers int
	// Clock is the time source of the certificates' validity and of the queue's delays
	// (the real clock when nil).
	Clock clock.WithTicker
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

func (c *SigningConfig) validate() error {
	var errs []error
	if len(c.CACert) == 0 && c.CACertFile == "" {
		errs = append(errs, errors.New("a CA certificate is required"))
	}
	if len(c.CAKey) == 0 && c.CAKeyFile == "" {
		errs = append(errs, errors.New("a CA key is required"))
	}
	if c.Duration < 0 {
		errs = append(errs, fmt.Errorf("duration %v < 0", c.Duration))
	}
	if c.Workers < 0 {
		errs = append(errs, fmt.Errorf("workers %d < 0", c.Workers))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: %w", SigningComponentName, err)
	}
	return nil
}

// SigningController signs the approved requests of the kubernetes.io signers with the
// cluster CA.
type SigningController struct {
	*csrController
	cfg    SigningConfig
	client kubernetes.Interface
	ca     *authority
}

// NewSigningController loads the CA and registers the controller's informer and handlers
// on factory; the caller starts the factory after every New.
func NewSigningController(cfg SigningConfig, client kubernetes.Interface, factory informers.SharedInformerFactory) (*SigningController, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Duration == 0 {
		cfg.Duration = DefaultSigningDuration
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
	certPEM, keyPEM := cfg.CACert, cfg.CAKey
	var err error
	if len(certPEM) == 0 {
		if certPEM, err = os.ReadFile(cfg.CACertFile); err != nil {
			return nil, fmt.Errorf("%s: read the CA certificate: %w", SigningComponentName, err)
		}
	}
	if len(keyPEM) == 0 {
		if keyPEM, err = os.ReadFile(cfg.CAKeyFile); err != nil {
			return nil, fmt.Errorf("%s: read the CA key: %w", SigningComponentName, err)
		}
	}
	ca, err := loadAuthority(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", SigningComponentName, err)
	}
	s := &SigningController{cfg: cfg, client: client, ca: ca}
	s.csrController, err = newCSRController(SigningComponentName, cfg.Workers, cfg.Clock, cfg.Logger, factory, s.handle)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// handle signs csr, or marks it Failed when its signer refuses it.
func (s *SigningController) handle(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	if !isApproved(csr) || hasTrueCondition(csr, certificatesv1.CertificateFailed) {
		return nil
	}
	validate, ok := signers[csr.Spec.SignerName]
	if !ok {
		return nil // another signer's request
	}
	cr, err := parseCSR(csr.Spec.Request)
	if err != nil {
		return fmt.Errorf("unable to parse csr %q: %w", csr.Name, err)
	}
	csrs := s.client.CertificatesV1().CertificateSigningRequests()
	if err := validate(cr, csr.Spec.Usages); err != nil {
		now := metav1.NewTime(s.cfg.Clock.Now())
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue,
			Reason: SignerValidationFailure, Message: err.Error(),
			LastUpdateTime: now, LastTransitionTime: now,
		})
		if _, err := csrs.UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("error adding failure condition for csr %q: %w", csr.Name, err)
		}
		s.cfg.Logger.InfoContext(ctx, "refused certificate signing request", "csr", csr.Name, "signer", csr.Spec.SignerName, "reason", err)
		return nil
	}
	der, err := s.ca.sign(cr, signingPolicy{
		TTL:      signingDuration(s.cfg.Duration, csr.Spec.ExpirationSeconds),
		Usages:   csr.Spec.Usages,
		Backdate: backdate,
		Short:    shortLived,
		Now:      s.cfg.Clock.Now(),
	})
	if err != nil {
		return fmt.Errorf("error auto signing csr %q: %w", csr.Name, err)
	}
	csr.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if _, err := csrs.UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("error updating signature for csr %q: %w", csr.Name, err)
	}
	s.cfg.Logger.InfoContext(ctx, "signed certificate signing request", "csr", csr.Name, "signer", csr.Spec.SignerName)
	return nil
}

// signingDuration is the validity of a certificate: max, or the requested
// expirationSeconds when shorter, but never under 10 minutes.
func signingDuration(max time.Duration, expirationSeconds *int32) time.Duration {
	if expirationSeconds == nil {
		return max
	}
	switch requested := time.Duration(*expirationSeconds) * time.Second; {
	case requested > max:
		return max
	case requested < minSigningDuration:
		return minSigningDuration
	default:
		return requested
	}
}

// signers are the signer names the controller signs for, with what each requires of a
// request; an error refuses the request.
var signers = map[string]func(*x509.CertificateRequest, []certificatesv1.KeyUsage) error{
	certificatesv1.KubeletServingSignerName:             validateKubeletServing,
	certificatesv1.KubeAPIServerClientKubeletSignerName: validateKubeletClient,
	certificatesv1.KubeAPIServerClientSignerName:        validateAPIServerClient,
	// No restrictions, for compatibility with certificates.k8s.io/v1beta1.
	certificatesv1beta1.LegacyUnknownSignerName: func(*x509.CertificateRequest, []certificatesv1.KeyUsage) error { return nil },
}

var (
	errOrganizationNotSystemNodes = errors.New("subject organization is not system:nodes")
	errCommonNameNotSystemNode    = errors.New("subject common name does not begin with system:node:")
	errDNSOrIPSANRequired         = errors.New("DNS or IP subjectAltName is required")
	errDNSSANNotAllowed           = errors.New("DNS subjectAltNames are not allowed")
	errEmailSANNotAllowed         = errors.New("Email subjectAltNames are not allowed")
	errIPSANNotAllowed            = errors.New("IP subjectAltNames are not allowed")
	errURISANNotAllowed           = errors.New("URI subjectAltNames are not allowed")
)

// usagesAre says whether usages, as a set, equal one of the allowed sets.
func usagesAre(usages []certificatesv1.KeyUsage, allowed ...[]certificatesv1.KeyUsage) bool {
	set := usageSet(usages)
	for _, a := range allowed {
		if len(set) != len(a) {
			continue
		}
		match := true
		for _, u := range a {
			match = match && set[u]
		}
		if match {
			return true
		}
	}
	return false
}

// validateKubeletServing is what kubernetes.io/kubelet-serving requires: organization
// system:nodes, a DNS or IP SAN and no other kind, usages digital signature and server
// auth (and key encipherment for RSA keys), common name system:node:<name>.
func validateKubeletServing(cr *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	if !reflect.DeepEqual([]string{"system:nodes"}, cr.Subject.Organization) {
		return errOrganizationNotSystemNodes
	}
	if len(cr.DNSNames) == 0 && len(cr.IPAddresses) == 0 {
		return errDNSOrIPSANRequired
	}
	if len(cr.EmailAddresses) > 0 {
		return errEmailSANNotAllowed
	}
	if len(cr.URIs) > 0 {
		return errURISANNotAllowed
	}
	if !usagesAre(usages,
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth},
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}) {
		return errors.New("usages did not match [digital signature key encipherment server auth]")
	}
	if !strings.HasPrefix(cr.Subject.CommonName, "system:node:") {
		return errCommonNameNotSystemNode
	}
	return nil
}

// validateKubeletClient is what kubernetes.io/kube-apiserver-client-kubelet requires:
// organization system:nodes, no SANs, common name system:node:<name>, usages digital
// signature and client auth (and key encipherment for RSA keys).
func validateKubeletClient(cr *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	if !reflect.DeepEqual([]string{"system:nodes"}, cr.Subject.Organization) {
		return errOrganizationNotSystemNodes
	}
	if len(cr.DNSNames) > 0 {
		return errDNSSANNotAllowed
	}
	if len(cr.EmailAddresses) > 0 {
		return errEmailSANNotAllowed
	}
	if len(cr.IPAddresses) > 0 {
		return errIPSANNotAllowed
	}
	if len(cr.URIs) > 0 {
		return errURISANNotAllowed
	}
	if !strings.HasPrefix(cr.Subject.CommonName, "system:node:") {
		return errCommonNameNotSystemNode
	}
	if !usagesAre(usages,
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth},
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}) {
		return errors.New("usages did not match [client auth digital signature key encipherment]")
	}
	return nil
}

// validateAPIServerClient is what kubernetes.io/kube-apiserver-client requires: client
// auth, and no usage but it, digital signature and key encipherment.
func validateAPIServerClient(_ *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	hasClientAuth := false
	for _, u := range usages {
		switch u {
		case certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment:
		case certificatesv1.UsageClientAuth:
			hasClientAuth = true
		default:
			return fmt.Errorf("invalid usage for client certificate: %s", u)
		}
	}
	if !hasClientAuth {
		return fmt.Errorf("missing required usage for client certificate: %s", certificatesv1.UsageClientAuth)
	}
	return nil
}
