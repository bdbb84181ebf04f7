package endpointslice

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubelab/kubelab/internal/util/endpointutil"
	"github.com/kubelab/kubelab/internal/util/worker"
)

// Config tunes the controller.
type Config struct {
	// Workers is the number of Services synced at once (5 when zero).
	Workers int
	// MaxEndpointsPerSlice caps each EndpointSlice (100 when zero, as upstream).
	MaxEndpointsPerSlice int
}

func (c *Config) validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("endpointslice controller: workers %d < 0", c.Workers)
	}
	if c.MaxEndpointsPerSlice < 0 || c.MaxEndpointsPerSlice > 1000 {
		return fmt.Errorf("endpointslice controller: max endpoints per slice %d not in 1..1000", c.MaxEndpointsPerSlice)
	}
	return nil
}

// errStaleCache: the informer has not yet seen every slice write of the controller for
// this Service. The sync is retried once it has; it is not the Service's failure, and
// gets no event.
var errStaleCache = errors.New("the endpointslice cache has not caught up with the controller's own writes yet")

// Controller keeps the EndpointSlices of Services.
type Controller struct {
	cfg         Config
	client      kubernetes.Interface
	svcLister   corelisters.ServiceLister
	podLister   corelisters.PodLister
	nodeLister  corelisters.NodeLister
	sliceLister discoverylisters.EndpointSliceLister
	tracker     *endpointutil.SliceTracker
	synced      []cache.InformerSynced
	queue       workqueue.TypedRateLimitingInterface[string]
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
}

// New registers the controller's informers and handlers on factory.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Workers == 0 {
		cfg.Workers = 5
	}
	if cfg.MaxEndpointsPerSlice == 0 {
		cfg.MaxEndpointsPerSlice = 100
	}
	svcInf := factory.Core().V1().Services()
	podInf := factory.Core().V1().Pods()
	nodeInf := factory.Core().V1().Nodes()
	sliceInf := factory.Discovery().V1().EndpointSlices()
	broadcaster := record.NewBroadcaster()
	c := &Controller{
		cfg: cfg, client: client,
		svcLister: svcInf.Lister(), podLister: podInf.Lister(), nodeLister: nodeInf.Lister(),
		sliceLister: sliceInf.Lister(), tracker: endpointutil.NewSliceTracker(),
		synced: []cache.InformerSynced{svcInf.Informer().HasSynced, podInf.Informer().HasSynced, nodeInf.Informer().HasSynced,
			sliceInf.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "endpointslice"}),
		broadcaster: broadcaster,
		recorder:    broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "endpointslice-controller"}),
	}
	add := func(h cache.ResourceEventHandler, inf cache.SharedIndexInformer) error {
		_, err := inf.AddEventHandler(h)
		return err
	}
	svcHandler := cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj interface{}) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	}
	podHandler := cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { c.podChanged(nil, obj) },
		UpdateFunc: func(old, obj interface{}) {
			if old.(*corev1.Pod).ResourceVersion != obj.(*corev1.Pod).ResourceVersion {
				c.podChanged(old, obj)
			}
		},
		DeleteFunc: func(obj interface{}) { c.podChanged(nil, obj) },
	}
	sliceHandler := cache.ResourceEventHandlerFuncs{
		// Adds too: a sync waiting for the cache to see its own create goes on then.
		AddFunc:    c.sliceChanged,
		UpdateFunc: func(_, obj interface{}) { c.sliceChanged(obj) },
		DeleteFunc: c.sliceDeleted,
	}
	for _, h := range []struct {
		h   cache.ResourceEventHandler
		inf cache.SharedIndexInformer
	}{{svcHandler, svcInf.Informer()}, {podHandler, podInf.Informer()}, {sliceHandler, sliceInf.Informer()}} {
		if err := add(h.h, h.inf); err != nil {
			return nil, err
		}
	}
	_ = nodeInf.Informer() // zones
	return c, nil
}

// Run waits for the caches, then syncs Services until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("endpointslice controller: caches did not sync: %w", ctx.Err())
	}
	worker.Start(ctx, c.cfg.Workers, c.queue, c.sync, worker.Failed("endpointslice", "service", func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || errors.Is(err, errStaleCache)
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

// sliceChanged enqueues the Service of a slice this controller manages, so that edits
// by others are put right.
func (c *Controller) sliceChanged(obj interface{}) {
	if s, key := managedSlice(obj); s != nil {
		c.queue.Add(key)
	}
}

// sliceDeleted: the cache can no longer be behind on a slice it saw deleted.
func (c *Controller) sliceDeleted(obj interface{}) {
	if s, key := managedSlice(obj); s != nil {
		c.tracker.Gone(key, s.Name)
		c.queue.Add(key)
	}
}

// managedSlice is obj (or the object of its tombstone) if it is a slice this
// controller manages, with the key of its Service.
func managedSlice(obj interface{}) (*discoveryv1.EndpointSlice, string) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || s.Labels[discoveryv1.LabelManagedBy] != ControllerName || s.Labels[discoveryv1.LabelServiceName] == "" {
		return nil, ""
	}
	return s, s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]
}
