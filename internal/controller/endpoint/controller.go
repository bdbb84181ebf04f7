package endpoint

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubelab/kubelab/internal/util/worker"
)

// Config tunes the controller.
type Config struct {
	// Workers is the number of Services synced at once (5 when zero, as upstream).
	Workers int
}

func (c *Config) validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("endpoint controller: workers %d < 0", c.Workers)
	}
	return nil
}

// Controller keeps the core/v1 Endpoints of Services.
type Controller struct {
	cfg         Config
	client      kubernetes.Interface
	svcLister   corelisters.ServiceLister
	podLister   corelisters.PodLister
	epLister    corelisters.EndpointsLister
	triggers    *triggerTimes
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
	svcInf := factory.Core().V1().Services()
	podInf := factory.Core().V1().Pods()
	epInf := factory.Core().V1().Endpoints()
	broadcaster := record.NewBroadcaster()
	c := &Controller{
		cfg: cfg, client: client,
		svcLister: svcInf.Lister(), podLister: podInf.Lister(), epLister: epInf.Lister(),
		triggers: newTriggerTimes(),
		synced:   []cache.InformerSynced{svcInf.Informer().HasSynced, podInf.Informer().HasSynced, epInf.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "endpoint"}),
		broadcaster: broadcaster,
		recorder:    broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: ControllerName}),
	}
	if _, err := svcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj interface{}) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	}); err != nil {
		return nil, err
	}
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { c.podChanged(nil, obj) },
		UpdateFunc: func(old, obj interface{}) {
			if old.(*corev1.Pod).ResourceVersion != obj.(*corev1.Pod).ResourceVersion {
				c.podChanged(old, obj)
			}
		},
		DeleteFunc: func(obj interface{}) { c.podChanged(nil, obj) },
	}); err != nil {
		return nil, err
	}
	// An Endpoints deleted (or edited) under a Service is written again; others'
	// Endpoints are not this controller's business.
	if _, err := epInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj interface{}) {
			if ep, ok := obj.(*corev1.Endpoints); ok && ep.Labels[ManagedByLabel] == ControllerName {
				c.enqueue(obj)
			}
		},
		DeleteFunc: c.enqueue,
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Run waits for the caches, then syncs Services until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("endpoint controller: caches did not sync: %w", ctx.Err())
	}
	// Endpoints this controller wrote for a Service that went while it was not running.
	if eps, err := c.epLister.List(labels.SelectorFromSet(labels.Set{ManagedByLabel: ControllerName})); err == nil {
		for _, ep := range eps {
			c.enqueue(ep)
		}
	}
	worker.Start(ctx, c.cfg.Workers, c.queue, c.sync, worker.Failed("endpoint", "service", func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}))
	<-ctx.Done()
	return nil
}

func (c *Controller) enqueue(obj interface{}) { worker.Enqueue(c.queue, obj) }

// podChanged enqueues the Services that select the pod, before or after the change.
func (c *Controller) podChanged(old, obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	sets := []labels.Set{pod.Labels}
	if old != nil {
		sets = append(sets, old.(*corev1.Pod).Labels)
	}
	svcs, err := c.svcLister.Services(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, svc := range svcs {
		if svc.Spec.Selector == nil {
			continue
		}
		sel := labels.SelectorFromValidatedSet(svc.Spec.Selector)
		for _, l := range sets {
			if sel.Matches(l) {
				c.enqueue(svc)
				break
			}
		}
	}
}
