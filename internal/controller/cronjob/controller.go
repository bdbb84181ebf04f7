package cronjob

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/util/worker"
)

// ComponentName is the source of the controller's Events, as upstream.
const ComponentName = "cronjob-controller"

// Config tunes the controller.
type Config struct {
	// Workers is the number of CronJobs synced at once (5 when zero, as upstream).
	Workers int
	// Clock is the time the schedules are read against, and the clock of the queue that
	// hands a CronJob back at its next start time (the real clock when nil).
	Clock clock.WithTicker
	// Location is the time zone of the schedules of CronJobs without spec.timeZone
	// (time.Local when nil: the controller-manager's own zone, as upstream).
	Location *time.Location
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("cronjob controller: workers %d < 0", c.Workers)
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Workers == 0 {
		c.Workers = 5
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Location == nil {
		c.Location = time.Local
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Controller starts the Jobs of CronJobs.
type Controller struct {
	cfg         Config
	client      kubernetes.Interface
	cronLister  batchlisters.CronJobLister
	jobLister   batchlisters.JobLister
	synced      []cache.InformerSynced
	queue       workqueue.TypedRateLimitingInterface[string]
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	log         *slog.Logger
}

// New registers the controller's informers and handlers on factory; the caller starts
// the factory after every New.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	cronInf := factory.Batch().V1().CronJobs()
	jobInf := factory.Batch().V1().Jobs()
	broadcaster := record.NewBroadcaster()
	c := &Controller{
		cfg: cfg, client: client,
		cronLister: cronInf.Lister(), jobLister: jobInf.Lister(),
		synced: []cache.InformerSynced{cronInf.Informer().HasSynced, jobInf.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "cronjob", Clock: cfg.Clock}),
		broadcaster: broadcaster,
		recorder:    broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: ComponentName}),
		log:         cfg.Logger.With("controller", ComponentName),
	}
	if _, err := cronInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: c.updateCronJob,
		DeleteFunc: c.enqueue,
	}); err != nil {
		return nil, err
	}
	if _, err := jobInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addJob,
		UpdateFunc: c.updateJob,
		DeleteFunc: c.deleteJob,
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Run waits for the caches, then syncs CronJobs until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("cronjob controller: caches did not sync: %w", ctx.Err())
	}
	c.log.InfoContext(ctx, "started", "workers", c.cfg.Workers)
	// A conflict is a stale cache: the retry reads the new version.
	worker.Start(ctx, c.cfg.Workers, c.queue, c.sync, worker.Failed("cronjob", "cronjob", apierrors.IsConflict))
	<-ctx.Done()
	return nil
}

func (c *Controller) enqueue(obj interface{}) { worker.Enqueue(c.queue, obj) }

// updateCronJob hands a CronJob whose schedule or time zone changed back at its new
// next start time (at once when that is sooner than the time it is queued for), and any
// other changed CronJob at once.
func (c *Controller) updateCronJob(oldObj, newObj interface{}) {
	old, ok1 := oldObj.(*batchv1.CronJob)
	cj, ok2 := newObj.(*batchv1.CronJob)
	if !ok1 || !ok2 {
		return
	}
	if old.Spec.Schedule == cj.Spec.Schedule && ptr.Equal(old.Spec.TimeZone, cj.Spec.TimeZone) {
		c.enqueue(cj)
		return
	}
	sched, err := parseSchedule(cj, c.cfg.Location)
	if err != nil {
		c.log.Info("unparseable schedule", "cronjob", cj.Namespace+"/"+cj.Name, "schedule", cj.Spec.Schedule, "err", err)
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "UnParseableCronJobSchedule", "unparseable schedule for cronjob: %s", cj.Spec.Schedule)
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(cj)
	if err != nil {
		return
	}
	c.queue.AddAfter(key, nextScheduleDelay(cj, c.cfg.Clock.Now(), sched))
}

// resolveControllerRef returns the CronJob ref names in namespace ns when it still is
// the one (same UID) the reference was made for.
func (c *Controller) resolveControllerRef(ns string, ref *metav1.OwnerReference) *batchv1.CronJob {
	if ref == nil || ref.Kind != controllerKind.Kind {
		return nil
	}
	cj, err := c.cronLister.CronJobs(ns).Get(ref.Name)
	if err != nil || cj.UID != ref.UID {
		return nil
	}
	return cj
}

func (c *Controller) enqueueOwner(job *batchv1.Job) {
	if cj := c.resolveControllerRef(job.Namespace, metav1.GetControllerOf(job)); cj != nil {
		c.enqueue(cj)
	}
}

func (c *Controller) addJob(obj interface{}) {
	job := obj.(*batchv1.Job)
	if job.DeletionTimestamp != nil {
		c.deleteJob(job)
		return
	}
	c.enqueueOwner(job)
}

func (c *Controller) updateJob(oldObj, newObj interface{}) {
	old, job := oldObj.(*batchv1.Job), newObj.(*batchv1.Job)
	if old.ResourceVersion == job.ResourceVersion {
		return
	}
	oldRef, ref := metav1.GetControllerOf(old), metav1.GetControllerOf(job)
	if oldRef != nil && !reflect.DeepEqual(oldRef, ref) {
		c.enqueueOwner(old)
	}
	c.enqueueOwner(job)
}

func (c *Controller) deleteJob(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if job, ok := obj.(*batchv1.Job); ok {
		c.enqueueOwner(job)
	}
}
