package deployment

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubelab/kubelab/internal/util/worker"
)

// ComponentName is the source of the controller's Events, as upstream.
const ComponentName = "deployment-controller"

// Config tunes the controller.
type Config struct {
	// Workers is the number of Deployments synced at once (5 when zero, as upstream).
	Workers int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

func (c *Config) validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("deployment controller: workers %d < 0", c.Workers)
	}
	return nil
}

// Controller rolls Deployments out through ReplicaSets.
type Controller struct {
	cfg         Config
	client      kubernetes.Interface
	dLister     appslisters.DeploymentLister
	rsLister    appslisters.ReplicaSetLister
	podLister   corelisters.PodLister
	synced      []cache.InformerSynced
	queue       workqueue.TypedRateLimitingInterface[string]
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
}

// New registers the controller's informers and handlers on factory; the caller starts
// the factory after every New.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Workers == 0 {
		cfg.Workers = 5
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	dInf := factory.Apps().V1().Deployments()
	rsInf := factory.Apps().V1().ReplicaSets()
	podInf := factory.Core().V1().Pods()
	broadcaster := record.NewBroadcaster()
	c := &Controller{
		cfg: cfg, client: client,
		dLister: dInf.Lister(), rsLister: rsInf.Lister(), podLister: podInf.Lister(),
		synced: []cache.InformerSynced{dInf.Informer().HasSynced, rsInf.Informer().HasSynced, podInf.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "deployment"}),
		broadcaster: broadcaster,
		recorder:    broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: ComponentName}),
	}
	if _, err := dInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj interface{}) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	}); err != nil {
		return nil, err
	}
	if _, err := rsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { c.rsChanged(nil, obj) },
		UpdateFunc: func(old, obj interface{}) {
			if old.(*appsv1.ReplicaSet).ResourceVersion != obj.(*appsv1.ReplicaSet).ResourceVersion {
				c.rsChanged(old, obj)
			}
		},
		DeleteFunc: func(obj interface{}) { c.rsChanged(nil, obj) },
	}); err != nil {
		return nil, err
	}
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj interface{}) { c.podGone(obj) },
		DeleteFunc: c.podGone,
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Run waits for the caches, then syncs Deployments until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("deployment controller: caches did not sync: %w", ctx.Err())
	}
	// A conflict is a stale cache: the retry reads the new version.
	worker.Start(ctx, c.cfg.Workers, c.queue, c.sync, worker.Failed("deployment", "deployment", apierrors.IsConflict))
	<-ctx.Done()
	return nil
}

func (c *Controller) enqueue(obj interface{}) { worker.Enqueue(c.queue, obj) }

// ownerDeployment is the name of the Deployment controlling obj, if any.
func ownerDeployment(obj metav1.Object) (string, bool) {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != "Deployment" || ref.APIVersion != appsv1.SchemeGroupVersion.String() {
		return "", false
	}
	return ref.Name, true
}

func (c *Controller) rsChanged(old, obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return
	}
	if old != nil {
		if name, ok := ownerDeployment(old.(*appsv1.ReplicaSet)); ok {
			c.queue.Add(rs.Namespace + "/" + name)
		}
	}
	if name, ok := ownerDeployment(rs); ok {
		c.queue.Add(rs.Namespace + "/" + name)
		return
	}
	// An orphan: the Deployments that select it may adopt it.
	ds, err := c.dLister.Deployments(rs.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, d := range ds {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(rs.Labels)) {
			c.enqueue(d)
		}
	}
}

// podGone wakes a Recreate Deployment when a pod of its old ReplicaSets goes away.
func (c *Controller) podGone(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return
	}
	rs, err := c.rsLister.ReplicaSets(pod.Namespace).Get(ref.Name)
	if err != nil {
		return
	}
	name, ok := ownerDeployment(rs)
	if !ok {
		return
	}
	d, err := c.dLister.Deployments(pod.Namespace).Get(name)
	if err == nil && d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		c.enqueue(d)
	}
}
