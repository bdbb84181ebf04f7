package ttlafterfinished

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/util/worker"
)

// ComponentName is the controller's name, as upstream (it records no Events).
const ComponentName = "ttl-after-finished-controller"

// Config tunes the controller.
type Config struct {
	// Workers is the number of Jobs looked at at once (5 when zero, as upstream's
	// --concurrent-ttl-after-finished-syncs).
	Workers int
	// Clock is the time source of the TTL decisions and of the queue's delays (the real
	// clock when nil).
	Clock clock.WithTicker
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("ttl-after-finished controller: workers %d < 0", c.Workers)
	}
	return nil
}

// Controller deletes finished Jobs whose TTL has passed.
type Controller struct {
	cfg    Config
	client kubernetes.Interface
	lister batchlisters.JobLister
	synced cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
}

// New registers the controller's informer and handlers on factory; the caller starts the
// factory after every New.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
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
	inf := factory.Batch().V1().Jobs()
	c := &Controller{
		cfg: cfg, client: client, lister: inf.Lister(), synced: inf.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "ttl_jobs_to_delete", Clock: cfg.Clock}),
	}
	enqueue := func(obj interface{}) {
		if job, ok := obj.(*batchv1.Job); ok && job.DeletionTimestamp == nil && needsCleanup(job) {
			worker.Enqueue(c.queue, job)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj interface{}) { enqueue(obj) },
	}); err != nil {
		return nil, fmt.Errorf("ttl-after-finished controller: %w", err)
	}
	return c, nil
}

// Run waits for the cache, then deletes expired Jobs until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return fmt.Errorf("ttl-after-finished controller: caches did not sync: %w", ctx.Err())
	}
	worker.Start(ctx, c.cfg.Workers, c.queue, c.sync, worker.Failed("ttl-after-finished", "job", apierrors.IsConflict))
	<-ctx.Done()
	return nil
}

// sync deletes Job key if its TTL has passed, or looks at it again when it will have.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	job, err := c.lister.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if expired, err := c.expired(key, job); err != nil || !expired {
		return err
	}
	// The cache may hold an old TTL: decide again on the Job as it is now.
	fresh, err := c.client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get job %s: %w", key, err)
	}
	if expired, err := c.expired(key, fresh); err != nil || !expired {
		return err
	}
	c.cfg.Logger.InfoContext(ctx, "deleting job whose TTL after finished has passed", "job", key)
	err = c.client.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationForeground),
		Preconditions:     &metav1.Preconditions{UID: &fresh.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete job %s: %w", key, err)
	}
	return nil
}

// expired says whether job's TTL has passed; when it has not, the key is looked at
// again when it will have.
func (c *Controller) expired(key string, job *batchv1.Job) (bool, error) {
	if job.DeletionTimestamp != nil || !needsCleanup(job) {
		return false, nil
	}
	now := c.cfg.Clock.Now()
	left, err := timeLeft(job, now)
	if err != nil {
		return false, err
	}
	if left <= 0 {
		return true, nil
	}
	c.queue.AddAfter(key, left)
	return false, nil
}

// needsCleanup says whether the Job has a TTL and has finished.
func needsCleanup(job *batchv1.Job) bool {
	return job.Spec.TTLSecondsAfterFinished != nil && finished(job)
}

func finished(job *batchv1.Job) bool {
	_, ok := finishTime(job)
	return ok
}

// finishTime is the lastTransitionTime of the Job's True Complete or Failed condition.
func finishTime(job *batchv1.Job) (metav1.Time, bool) {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime, true
		}
	}
	return metav1.Time{}, false
}

// timeLeft is how long after now the finished Job's TTL passes (<= 0: it has). A Job
// whose terminal condition has no time cannot be decided.
func timeLeft(job *batchv1.Job, now time.Time) (time.Duration, error) {
	at, ok := finishTime(job)
	if !ok || job.Spec.TTLSecondsAfterFinished == nil {
		return 0, fmt.Errorf("job %s/%s has not finished or has no TTL", job.Namespace, job.Name)
	}
	if at.IsZero() {
		return 0, fmt.Errorf("unable to find the time when the Job %s/%s finished", job.Namespace, job.Name)
	}
	expireAt := at.Add(time.Duration(*job.Spec.TTLSecondsAfterFinished) * time.Second)
	return expireAt.Sub(now), nil
}
