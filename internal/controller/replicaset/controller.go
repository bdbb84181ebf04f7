package replicaset

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/kubelab/kubelab/internal/controller/expectations"
	"github.com/kubelab/kubelab/internal/util/worker"
)

// ComponentName is the source of the controller's Events, as upstream.
const ComponentName = "replicaset-controller"

// Config tunes the controller.
type Config struct {
	// Workers is the number of ReplicaSets synced at once (5 when zero, as upstream).
	Workers int
	// BurstReplicas caps the pods created or deleted in one sync (500 when zero).
	BurstReplicas int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

func (c *Config) validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("replicaset controller: workers %d < 0", c.Workers)
	}
	if c.BurstReplicas < 0 {
		return fmt.Errorf("replicaset controller: burst replicas %d < 0", c.BurstReplicas)
	}
	return nil
}

// Controller keeps the pods of ReplicaSets (or of another Workload).
type Controller struct {
	cfg          Config
	client       kubernetes.Interface
	workload     Workload
	podLister    corelisters.PodLister
	synced       []cache.InformerSynced
	queue        workqueue.TypedRateLimitingInterface[string]
	expectations *expectations.Expectations
	broadcaster  record.EventBroadcaster
	recorder     record.EventRecorder
}

// New registers the controller's informers and handlers on factory; the caller starts
// the factory after every New.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory) (*Controller, error) {
	return NewFor(cfg, client, factory.Core().V1().Pods(), replicaSetWorkload(client, factory))
}

// NewFor is New for the objects of w, whose informer, like pods, the caller starts.
func NewFor(cfg Config, client kubernetes.Interface, pods coreinformers.PodInformer, w Workload) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Workers == 0 {
		cfg.Workers = 5
	}
	if cfg.BurstReplicas == 0 {
		cfg.BurstReplicas = 500
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	broadcaster := record.NewBroadcaster()
	c := &Controller{
		cfg: cfg, client: client, workload: w,
		podLister: pods.Lister(),
		synced:    []cache.InformerSynced{w.Informer.HasSynced, pods.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: w.QueueName}),
		expectations: expectations.New(cfg.Now),
		broadcaster:  broadcaster,
		recorder:     broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: w.Component}),
	}
	if _, err := w.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj interface{}) { c.enqueue(obj) },
		DeleteFunc: c.deleteRS,
	}); err != nil {
		return nil, err
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addPod,
		UpdateFunc: c.updatePod,
		DeleteFunc: c.deletePod,
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Run waits for the caches, then syncs ReplicaSets until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()
	name := strings.ToLower(c.workload.Kind.Kind)
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("%s controller: caches did not sync: %w", name, ctx.Err())
	}
	// A conflict is a stale cache: the retry reads the new version.
	worker.Start(ctx, c.cfg.Workers, c.queue, c.sync, worker.Failed(name, name, apierrors.IsConflict))
	<-ctx.Done()
	return nil
}

func (c *Controller) enqueue(obj interface{}) { worker.Enqueue(c.queue, obj) }

func (c *Controller) deleteRS(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	c.expectations.Forget(key)
	c.queue.Add(key)
}

// ownerKey returns the key of the ReplicaSet (object of the workload) controlling pod,
// if any.
func (c *Controller) ownerKey(pod *corev1.Pod) (string, bool) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != c.workload.Kind.Kind || ref.APIVersion != c.workload.Kind.GroupVersion().String() {
		return "", false
	}
	return pod.Namespace + "/" + ref.Name, true
}

// enqueueMatching enqueues the ReplicaSets whose selector matches an orphan pod, so one
// of them adopts it.
func (c *Controller) enqueueMatching(pod *corev1.Pod) {
	list, err := c.workload.Objects.List(pod.Namespace)
	if err != nil {
		return
	}
	for _, rs := range list {
		sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		c.enqueue(rs)
	}
}

func (c *Controller) addPod(obj interface{}) {
	pod := obj.(*corev1.Pod)
	if pod.DeletionTimestamp != nil {
		c.deletePod(pod)
		return
	}
	if key, ok := c.ownerKey(pod); ok {
		c.expectations.Created(key)
		c.queue.Add(key)
		return
	}
	c.enqueueMatching(pod)
}

func (c *Controller) updatePod(oldObj, newObj interface{}) {
	old, pod := oldObj.(*corev1.Pod), newObj.(*corev1.Pod)
	if old.ResourceVersion == pod.ResourceVersion {
		return
	}
	if pod.DeletionTimestamp != nil && old.DeletionTimestamp == nil {
		// A pod marked for deletion is as good as gone for the expectations.
		if key, ok := c.ownerKey(pod); ok {
			c.expectations.Deleted(key, pod.Namespace+"/"+pod.Name)
		}
	}
	oldKey, oldOwned := c.ownerKey(old)
	key, owned := c.ownerKey(pod)
	if oldOwned && (!owned || oldKey != key) {
		c.queue.Add(oldKey)
	}
	if owned {
		c.queue.Add(key)
		if rs, err := c.workload.Objects.Get(pod.Namespace, metav1.GetControllerOf(pod).Name); err == nil && rs.Spec.MinReadySeconds > 0 && !podutils.IsPodReady(old) && podutils.IsPodReady(pod) {
			// Available only minReadySeconds after ready: look again then.
			c.queue.AddAfter(key, time.Duration(rs.Spec.MinReadySeconds)*time.Second+time.Second)
		}
		return
	}
	if !labels.Equals(old.Labels, pod.Labels) || oldOwned {
		c.enqueueMatching(pod)
	}
}

func (c *Controller) deletePod(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if key, ok := c.ownerKey(pod); ok {
		c.expectations.Deleted(key, pod.Namespace+"/"+pod.Name)
		c.queue.Add(key)
	}
}
