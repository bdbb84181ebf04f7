package certificates

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// CleanerComponentName is the cleaner controller's name, as upstream.
const CleanerComponentName = "csrcleaner-controller"

const (
	// DefaultCleanerInterval is how often every request is looked at, as upstream.
	DefaultCleanerInterval = time.Hour
	// How long requests are kept, by state, as upstream.
	approvedExpiration = time.Hour
	deniedExpiration   = time.Hour
	pendingExpiration  = 24 * time.Hour
)

// CleanerConfig tunes the cleaner controller.
type CleanerConfig struct {
	// Interval between two looks at every request (DefaultCleanerInterval when zero).
	Interval time.Duration
	// Clock is the time source of the ages and of the interval (the real clock when nil).
	Clock clock.WithTicker
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

// CleanerController deletes the requests that are done with, or were never dealt with.
type CleanerController struct {
	cfg    CleanerConfig
	client kubernetes.Interface
	lister certlisters.CertificateSigningRequestLister
	synced cache.InformerSynced
}

// NewCleanerController registers the controller's informer on factory; the caller starts
// the factory after every New.
func NewCleanerController(cfg CleanerConfig, client kubernetes.Interface, factory informers.SharedInformerFactory) (*CleanerController, error) {
	if cfg.Interval < 0 {
		return nil, fmt.Errorf("%s: interval %v < 0", CleanerComponentName, cfg.Interval)
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultCleanerInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	inf := factory.Certificates().V1().CertificateSigningRequests()
	return &CleanerController{cfg: cfg, client: client, lister: inf.Lister(), synced: inf.Informer().HasSynced}, nil
}

// Run waits for the cache, then looks at every request at once and each Interval after,
// until ctx ends.
func (c *CleanerController) Run(ctx context.Context) error {
	c.cfg.Logger.InfoContext(ctx, "starting CSR cleaner controller")
	defer c.cfg.Logger.InfoContext(ctx, "shutting down CSR cleaner controller")
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return fmt.Errorf("%s: caches did not sync: %w", CleanerComponentName, ctx.Err())
	}
	ticker := c.cfg.Clock.NewTicker(c.cfg.Interval)
	defer ticker.Stop()
	for {
		c.clean(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}

// clean deletes every request cleanReason has a reason for.
func (c *CleanerController) clean(ctx context.Context) {
	csrs, err := c.lister.List(labels.Everything())
	if err != nil {
		c.cfg.Logger.ErrorContext(ctx, "unable to list CSRs", "err", err)
		return
	}
	now := c.cfg.Clock.Now()
	for _, csr := range csrs {
		reason := cleanReason(csr, now)
		if reason == "" {
			continue
		}
		c.cfg.Logger.InfoContext(ctx, reason, "csr", csr.Name)
		err := c.client.CertificatesV1().CertificateSigningRequests().Delete(ctx, csr.Name,
			metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &csr.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			c.cfg.Logger.ErrorContext(ctx, "error while attempting to clean CSR", "csr", csr.Name, "err", fmt.Errorf("unable to delete CSR %q: %w", csr.Name, err))
		}
	}
}

// cleanReason says why csr is to be deleted at now, or "" when it is kept: issued and
// approved more than an hour ago, denied or failed more than an hour ago, pending
// (no condition) for more than a day, or issued a certificate that has expired.
func cleanReason(csr *certificatesv1.CertificateSigningRequest, now time.Time) string {
	issued := len(csr.Status.Certificate) > 0
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved && issued && olderThan(c.LastUpdateTime, approvedExpiration, now) {
			return "Cleaning CSR as it is more than approvedExpiration duration old and approved."
		}
	}
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateDenied && olderThan(c.LastUpdateTime, deniedExpiration, now) {
			return "Cleaning CSR as it is more than deniedExpiration duration old and denied."
		}
	}
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateFailed && olderThan(c.LastUpdateTime, deniedExpiration, now) {
			return "Cleaning CSR as it is more than deniedExpiration duration old and failed."
		}
	}
	if len(csr.Status.Conditions) == 0 && olderThan(csr.CreationTimestamp, pendingExpiration, now) {
		return "Cleaning CSR as it is more than pendingExpiration duration old and unhandled."
	}
	if issued && certificateExpired(csr.Status.Certificate, now) {
		for _, c := range csr.Status.Conditions {
			if c.Type == certificatesv1.CertificateApproved {
				return "Cleaning CSR as the associated certificate is expired."
			}
		}
	}
	return ""
}

// olderThan says whether t is set and more than d before now.
func olderThan(t metav1.Time, d time.Duration, now time.Time) bool {
	return !t.IsZero() && t.Sub(now) < -d
}

// certificateExpired says whether the first certificate of a PEM bundle has expired at
// now; an unreadable one has not.
func certificateExpired(certPEM []byte, now time.Time) bool {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return false
	}
	certs, err := x509.ParseCertificates(block.Bytes)
	if err != nil || len(certs) == 0 {
		return false
	}
	return now.After(certs[0].NotAfter)
}
