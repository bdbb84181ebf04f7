package job

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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/kubelab/kubelab/internal/controller/expectations"
	"github.com/kubelab/kubelab/internal/util/worker"
)

// ComponentName is the source of the controller's Events, as upstream.
const ComponentName = "job-controller"

// Config tunes the controller.
type Config struct {
	// Workers is the number of Jobs synced at once (5 when zero, as upstream).
	Workers int
	// Clock is the time source of every decision and of the queues' delays (the real
	// clock when nil).
	Clock clock.WithTicker
	// SyncBatchPeriod gathers the pod events of a Job into one sync (1s when zero, as
	// upstream; negative: sync at once).
	SyncBatchPeriod time.Duration
	// PodFailureBackOff and MaxPodFailureBackOff are the pod re-creation back-off after
	// failures: the first delay, doubled per failure in a row, and its cap (10s and 10 min
	// when zero, as upstream).
	PodFailureBackOff, MaxPodFailureBackOff time.Duration
	// MaxPodsPerSync caps the pods created or deleted, and the finished pods counted, in
	// one sync (500 when zero, as upstream).
	MaxPodsPerSync int
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) validate() error {
	switch {
	case c.Workers < 0:
		return fmt.Errorf("job controller: workers %d < 0", c.Workers)
	case c.PodFailureBackOff < 0 || c.MaxPodFailureBackOff < 0:
		return fmt.Errorf("job controller: negative pod failure back-off")
	case c.MaxPodsPerSync < 0:
		return fmt.Errorf("job controller: max pods per sync %d < 0", c.MaxPodsPerSync)
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
	if c.SyncBatchPeriod == 0 {
		c.SyncBatchPeriod = time.Second
	}
	if c.PodFailureBackOff == 0 {
		c.PodFailureBackOff = 10 * time.Second
	}
	if c.MaxPodFailureBackOff == 0 {
		c.MaxPodFailureBackOff = 10 * time.Minute
	}
	if c.MaxPodsPerSync == 0 {
		c.MaxPodsPerSync = 500
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Controller runs the pods of Jobs.
type Controller struct {
	cfg       Config
	client    kubernetes.Interface
	jobLister batchlisters.JobLister
	podLister corelisters.PodLister
	synced    []cache.InformerSynced
	// queue holds Job keys; orphans holds the keys of pods that carry the tracking
	// finalizer but no longer belong to a running Job.
	queue, orphans workqueue.TypedRateLimitingInterface[string]
	expectations   *expectations.Expectations
	finalizers     *finalizerExpectations
	backoff        *backoffStore
	broadcaster    record.EventBroadcaster
	recorder       record.EventRecorder
}

// New registers the controller's informers and handlers on factory; the caller starts
// the factory after every New.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	jobInf := factory.Batch().V1().Jobs()
	podInf := factory.Core().V1().Pods()
	limiter := func() workqueue.TypedRateLimiter[string] {
		return workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute)
	}
	broadcaster := record.NewBroadcaster()
	c := &Controller{
		cfg: cfg, client: client,
		jobLister: jobInf.Lister(), podLister: podInf.Lister(),
		synced: []cache.InformerSynced{jobInf.Informer().HasSynced, podInf.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(limiter(),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "job", Clock: cfg.Clock}),
		orphans: workqueue.NewTypedRateLimitingQueueWithConfig(limiter(),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "job_orphan_pod", Clock: cfg.Clock}),
		expectations: expectations.New(cfg.Clock.Now),
		finalizers:   newFinalizerExpectations(),
		backoff:      newBackoffStore(),
		broadcaster:  broadcaster,
		recorder:     broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: ComponentName}),
	}
	if _, err := jobInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.enqueueAfter(obj, 0) },
		UpdateFunc: c.updateJob,
		DeleteFunc: c.deleteJob,
	}); err != nil {
		return nil, fmt.Errorf("job controller: %w", err)
	}
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addPod,
		UpdateFunc: c.updatePod,
		DeleteFunc: func(obj interface{}) { c.podDeleted(obj, true) },
	}); err != nil {
		return nil, fmt.Errorf("job controller: %w", err)
	}
	return c, nil
}

// Run waits for the caches, then syncs Jobs (and cleans orphan pods) until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	defer c.orphans.ShutDown()
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("job controller: caches did not sync: %w", ctx.Err())
	}
	// A conflict is a stale cache: the retry reads the new version.
	worker.Start(ctx, c.cfg.Workers, c.queue, c.sync, worker.Failed("job", "job", apierrors.IsConflict))
	worker.Start(ctx, 1, c.orphans, c.syncOrphanPod, worker.Failed("job orphan pod", "pod", apierrors.IsConflict))
	<-ctx.Done()
	return nil
}

// enqueueAfter adds the Job's key after delay (at once when delay <= 0).
func (c *Controller) enqueueAfter(obj interface{}, delay time.Duration) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	c.queue.AddAfter(key, delay)
}

// enqueueBatched adds the Job's key after the batch period, gathering pod events.
func (c *Controller) enqueueBatched(obj interface{}) { c.enqueueAfter(obj, c.batchPeriod()) }

func (c *Controller) batchPeriod() time.Duration { return max(c.cfg.SyncBatchPeriod, 0) }

func (c *Controller) updateJob(oldObj, newObj interface{}) {
	old, cur := oldObj.(*batchv1.Job), newObj.(*batchv1.Job)
	if cur.Generation == old.Generation {
		c.enqueueBatched(cur) // a status write: gather it with pod events
	} else {
		c.enqueueAfter(cur, 0) // a spec change acts at once
	}
	if finished(cur) {
		c.cleanupFinalizers(cur) // pods of a finished Job keep no finalizer
	}
	// A changed activeDeadlineSeconds needs a sync when it passes.
	if cur.Status.StartTime != nil && cur.Spec.ActiveDeadlineSeconds != nil &&
		(old.Spec.ActiveDeadlineSeconds == nil || *old.Spec.ActiveDeadlineSeconds != *cur.Spec.ActiveDeadlineSeconds) {
		left := time.Duration(*cur.Spec.ActiveDeadlineSeconds)*time.Second - c.cfg.Clock.Since(cur.Status.StartTime.Time)
		c.enqueueAfter(cur, left)
	}
}

func (c *Controller) deleteJob(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return
	}
	c.enqueueAfter(job, 0)
	c.cleanupFinalizers(job)
}

// cleanupFinalizers queues the pods of job that still carry the tracking finalizer.
func (c *Controller) cleanupFinalizers(job *batchv1.Job) {
	sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil {
		return
	}
	pods, _ := c.podLister.Pods(job.Namespace).List(sel)
	for _, p := range pods {
		if metav1.IsControlledBy(p, job) && hasTrackingFinalizer(p) {
			worker.Enqueue(c.orphans, p)
		}
	}
}

// jobOf is the Job a controller reference names, if the cache has it with that UID.
func (c *Controller) jobOf(ns string, ref *metav1.OwnerReference) *batchv1.Job {
	if ref == nil || ref.Kind != "Job" {
		return nil
	}
	job, err := c.jobLister.Jobs(ns).Get(ref.Name)
	if err != nil || job.UID != ref.UID {
		return nil
	}
	return job
}

// jobsMatching are the Jobs whose selector matches pod's labels (candidates to adopt it).
func (c *Controller) jobsMatching(pod *corev1.Pod) []*batchv1.Job {
	if len(pod.Labels) == 0 {
		return nil
	}
	jobs, err := c.jobLister.Jobs(pod.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*batchv1.Job
	for _, j := range jobs {
		sel, err := metav1.LabelSelectorAsSelector(j.Spec.Selector)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(pod.Labels)) {
			out = append(out, j)
		}
	}
	return out
}

func jobKey(job *batchv1.Job) string { return job.Namespace + "/" + job.Name }

func (c *Controller) addPod(obj interface{}) {
	pod := obj.(*corev1.Pod)
	if pod.DeletionTimestamp != nil {
		// Seen first while being deleted (a restart): not a creation to count.
		c.podDeleted(pod, false)
		return
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		if job := c.jobOf(pod.Namespace, ref); job != nil {
			c.expectations.Created(jobKey(job))
			c.enqueueBatched(job)
		}
		return
	}
	if hasTrackingFinalizer(pod) {
		worker.Enqueue(c.orphans, pod)
	}
	for _, job := range c.jobsMatching(pod) {
		c.enqueueBatched(job)
	}
}

func (c *Controller) updatePod(oldObj, newObj interface{}) {
	old, cur := oldObj.(*corev1.Pod), newObj.(*corev1.Pod)
	if cur.ResourceVersion == old.ResourceVersion {
		return // a resync
	}
	if cur.DeletionTimestamp != nil {
		// Gone for the Job as soon as it is being deleted: it may be replaced now.
		c.podDeleted(cur, false)
		return
	}
	finalizerGone := !hasTrackingFinalizer(cur)
	curRef, oldRef := metav1.GetControllerOf(cur), metav1.GetControllerOf(old)
	refChanged := !reflect.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if job := c.jobOf(old.Namespace, oldRef); job != nil {
			if finalizerGone {
				c.finalizers.observed(jobKey(job), cur.UID)
			}
			c.enqueueBatched(job)
		}
	}
	if curRef != nil {
		if job := c.jobOf(cur.Namespace, curRef); job != nil {
			if finalizerGone {
				c.finalizers.observed(jobKey(job), cur.UID)
			}
			c.enqueueBatched(job)
		}
		return
	}
	if hasTrackingFinalizer(cur) {
		worker.Enqueue(c.orphans, cur)
	}
	if refChanged || !reflect.DeepEqual(cur.Labels, old.Labels) {
		for _, job := range c.jobsMatching(cur) {
			c.enqueueBatched(job)
		}
	}
}

// podDeleted handles a pod deleted (final) or marked for deletion.
func (c *Controller) podDeleted(obj interface{}, final bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(pod)
	withFinalizer := hasTrackingFinalizer(pod)
	if ref == nil {
		if withFinalizer {
			worker.Enqueue(c.orphans, pod)
		}
		return
	}
	job := c.jobOf(pod.Namespace, ref)
	if job == nil || finished(job) {
		if withFinalizer {
			worker.Enqueue(c.orphans, pod) // no sync will remove it
		}
		return
	}
	key := jobKey(job)
	c.expectations.Deleted(key, pod.Namespace+"/"+pod.Name)
	if final || !withFinalizer {
		c.finalizers.observed(key, pod.UID)
	}
	c.enqueueBatched(job)
}

// syncOrphanPod removes the tracking finalizer from a pod no running Job of this
// controller controls.
func (c *Controller) syncOrphanPod(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := c.podLister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		if ref.Kind != "Job" || ref.APIVersion != batchv1.SchemeGroupVersion.String() {
			return nil // another kind's pod: not ours to touch
		}
		if job := c.jobOf(ns, ref); job != nil && (managedElsewhere(job) || !finished(job)) {
			return nil // adopted meanwhile, or another controller's
		}
	}
	if patch := removeFinalizerPatch(pod); patch != nil {
		if err := c.patchPod(ctx, pod, patch); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
