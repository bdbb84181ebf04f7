package certificates

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/informers"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"golang.org/x/time/rate"

	"github.com/kubelab/kubelab/internal/util/worker"
)

// csrController is the loop the signing and approving controllers share: every add and
// update of a CertificateSigningRequest queues its name; sync hands a copy of a request
// that has no certificate yet to handle.
type csrController struct {
	name    string
	workers int
	logger  *slog.Logger
	lister  certlisters.CertificateSigningRequestLister
	synced  cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[string]
	handle  func(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error
}

func newCSRController(name string, workers int, clk clock.WithTicker, logger *slog.Logger, factory informers.SharedInformerFactory,
	handle func(context.Context, *certificatesv1.CertificateSigningRequest) error) (*csrController, error) {
	inf := factory.Certificates().V1().CertificateSigningRequests()
	// As upstream's certificate controllers: per-request back-off from 200ms to 1000s,
	// overall 10 retries a second (burst 100).
	limiter := workqueue.NewTypedMaxOfRateLimiter[string](
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 1000*time.Second),
		&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
	c := &csrController{
		name: name, workers: workers, logger: logger, lister: inf.Lister(), synced: inf.Informer().HasSynced, handle: handle,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "certificate", Clock: clk}),
	}
	enqueue := func(obj any) { worker.Enqueue(c.queue, obj) }
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// Run waits for the cache, then handles requests until ctx ends.
func (c *csrController) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.logger.InfoContext(ctx, "starting certificate controller", "name", c.name)
	defer c.logger.InfoContext(ctx, "shutting down certificate controller", "name", c.name)
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return fmt.Errorf("%s: caches did not sync: %w", c.name, ctx.Err())
	}
	worker.Start(ctx, c.workers, c.queue, c.sync, worker.Failed(c.name, "csr", isIgnorable))
	<-ctx.Done()
	return nil
}

func (c *csrController) sync(ctx context.Context, name string) error {
	csr, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(csr.Status.Certificate) > 0 {
		return nil // issued: nothing left to do
	}
	return c.handle(ctx, csr.DeepCopy())
}

// ignorableError is a failure worth a retry but not an error log: a request the
// controller recognizes but may not act on yet.
type ignorableError string

func (e ignorableError) Error() string { return string(e) }

func isIgnorable(err error) bool {
	var ie ignorableError
	return errors.As(err, &ie)
}

// approvalCondition says whether status holds an Approved and a Denied condition, of any
// status.
func approvalCondition(status *certificatesv1.CertificateSigningRequestStatus) (approved, denied bool) {
	for _, c := range status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved:
			approved = true
		case certificatesv1.CertificateDenied:
			denied = true
		}
	}
	return approved, denied
}

// isApproved says whether csr is Approved and not Denied.
func isApproved(csr *certificatesv1.CertificateSigningRequest) bool {
	approved, denied := approvalCondition(&csr.Status)
	return approved && !denied
}

// hasTrueCondition says whether csr has a condition of type t whose status is True or
// empty.
func hasTrueCondition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == t && (c.Status == "" || c.Status == corev1.ConditionTrue) {
			return true
		}
	}
	return false
}

// parseCSR decodes the PEM CERTIFICATE REQUEST of a CertificateSigningRequest.
func parseCSR(pemBytes []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("PEM block type must be CERTIFICATE REQUEST")
	}
	return x509.ParseCertificateRequest(block.Bytes)
}

// usageSet is the set of usages of a request.
func usageSet(usages []certificatesv1.KeyUsage) map[certificatesv1.KeyUsage]bool {
	set := make(map[certificatesv1.KeyUsage]bool, len(usages))
	for _, u := range usages {
		set[u] = true
	}
	return set
}
