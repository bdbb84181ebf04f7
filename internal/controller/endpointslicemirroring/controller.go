package endpointslicemirroring

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	// Workers is the number of Endpoints synced at once (5 when zero, as upstream).
	Workers int
	// MaxEndpointsPerSubset is the most addresses of one Endpoints subset mirrored
	// (1000 when zero, as upstream's --mirroring-max-endpoints-per-subset).
	MaxEndpointsPerSubset int
}

func (c *Config) validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("endpointslice mirroring controller: workers %d < 0", c.Workers)
	}
	if c.MaxEndpointsPerSubset < 0 || c.MaxEndpointsPerSubset > 1000 {
		return fmt.Errorf("endpointslice mirroring controller: max endpoints per subset %d not in 1..1000", c.MaxEndpointsPerSubset)
	}
	return nil
}

// errStaleCache: the informer has not yet seen every slice write of the controller for
// this Endpoints. The sync is retried once it has.
var errStaleCache = errors.New("the endpointslice cache has not caught up with the controller's own writes yet")

// Controller mirrors custom Endpoints into EndpointSlices.
type Controller struct {
	cfg         Config
	client      kubernetes.Interface
	svcLister   corelisters.ServiceLister
	epLister    corelisters.EndpointsLister
	sliceLister discoverylisters.EndpointSliceLister
	tracker     *endpointutil.SliceTracker
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
	if cfg.MaxEndpointsPerSubset == 0 {
		cfg.MaxEndpointsPerSubset = 1000
	}
	svcInf := factory.Core().V1().Services()
	epInf := factory.Core().V1().Endpoints()
	sliceInf := factory.Discovery().V1().EndpointSlices()
	broadcaster := record.NewBroadcaster()
	c := &Controller{
		cfg: cfg, client: client,
		svcLister: svcInf.Lister(), epLister: epInf.Lister(), sliceLister: sliceInf.Lister(),
		tracker: endpointutil.NewSliceTracker(),
		synced:  []cache.InformerSynced{svcInf.Informer().HasSynced, epInf.Informer().HasSynced, sliceInf.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "endpointslice_mirroring"}),
		broadcaster: broadcaster,
		recorder:    broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: EventSource}),
	}
	if _, err := svcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.serviceChanged,
		UpdateFunc: func(old, obj interface{}) {
			if (old.(*corev1.Service).Spec.Selector == nil) != (obj.(*corev1.Service).Spec.Selector == nil) {
				c.enqueue(obj)
			}
		},
		DeleteFunc: c.serviceChanged,
	}); err != nil {
		return nil, err
	}
	if _, err := epInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj interface{}) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	}); err != nil {
		return nil, err
	}
	if _, err := sliceInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.sliceChanged,
		UpdateFunc: func(old, obj interface{}) {
			c.sliceChanged(old) // a slice relabelled away from this controller or its Endpoints
			c.sliceChanged(obj)
		},
		DeleteFunc: c.sliceDeleted,
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Run waits for the caches, then syncs Endpoints until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("endpointslice mirroring controller: caches did not sync: %w", ctx.Err())
	}
	worker.Start(ctx, c.cfg.Workers, c.queue, c.sync, worker.Failed("endpointslice mirroring", "endpoints", func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || errors.Is(err, errStaleCache)
	}))
	<-ctx.Done()
	return nil
}

func (c *Controller) enqueue(obj interface{}) { worker.Enqueue(c.queue, obj) }

// serviceChanged enqueues the Endpoints of a selector-less Service that came or went.
func (c *Controller) serviceChanged(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if svc, ok := obj.(*corev1.Service); ok && svc.Spec.Selector == nil {
		c.enqueue(svc)
	}
}

// sliceChanged enqueues the Endpoints of a slice this controller manages, so that
// edits by others are put right.
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
// controller manages, with the key of its Endpoints.
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
