package resourcequota

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubelab/kubelab/internal/util/quotaeval"
	"github.com/kubelab/kubelab/internal/util/worker"
)

// errCacheNotSynced: a kind a quota counts is still being listed; the quota is synced
// again shortly.
var errCacheNotSynced = errors.New("cache not yet synced")

// recountAfterGiveBack is when a quota whose recount gave usage back is recounted
// again: long enough for objects admitted during the first recount to be in the caches.
const recountAfterGiveBack = time.Second

// Controller keeps every ResourceQuota's status: hard from spec, used from the objects.
type Controller struct {
	cfg    Config
	client kubernetes.Interface
	log    *slog.Logger

	factory    informers.SharedInformerFactory
	quotas     corelisters.ResourceQuotaLister
	synced     []cache.InformerSynced
	queue      workqueue.TypedRateLimitingInterface[string]
	evaluators []quota.Evaluator
	byResource map[schema.GroupResource]quota.Evaluator
	mapper     *restmapper.DeferredDiscoveryRESTMapper

	mu      sync.Mutex
	watched map[schema.GroupVersionResource]informers.GenericInformer
	stop    <-chan struct{}
}

// New builds the controller and registers its informers on factory (the caller starts
// it after all New calls).
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if client == nil || factory == nil {
		return nil, errors.New("resourcequota: client and informer factory are required")
	}
	cfg.setDefaults()
	qInf := factory.Core().V1().ResourceQuotas()
	c := &Controller{
		cfg: cfg, client: client, log: cfg.Logger.With("controller", "resourcequota-controller"),
		factory: factory, quotas: qInf.Lister(), synced: []cache.InformerSynced{qInf.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "resourcequota_primary"}),
		mapper:  restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery())),
		watched: map[schema.GroupVersionResource]informers.GenericInformer{},
	}
	c.evaluators = quotaeval.Evaluators(c.listerFor)
	c.byResource = map[schema.GroupResource]quota.Evaluator{}
	for _, e := range c.evaluators {
		c.byResource[e.GroupResource()] = e
	}
	if _, err := qInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { worker.Enqueue(c.queue, obj) },
		UpdateFunc: func(old, cur interface{}) {
			o, ok1 := old.(*corev1.ResourceQuota)
			n, ok2 := cur.(*corev1.ResourceQuota)
			if ok1 && ok2 && (!apiequality.Semantic.DeepEqual(o.Spec, n.Spec) || needsSync(n)) {
				worker.Enqueue(c.queue, cur)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("resourcequota: %w", err)
	}
	for _, gvr := range quotaeval.EvaluatedResources() {
		inf, err := c.watch(gvr)
		if err != nil {
			return nil, err
		}
		c.synced = append(c.synced, inf.Informer().HasSynced)
	}
	return c, nil
}

// Run syncs quotas until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.mu.Lock()
	c.stop = ctx.Done()
	c.mu.Unlock()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return ctx.Err()
	}
	worker.Start(ctx, c.cfg.Workers, c.queue, c.sync,
		worker.Failed("resourcequota", "quota", func(err error) bool {
			return errors.Is(err, errCacheNotSynced) || apierrors.IsConflict(err)
		}))
	go wait.UntilWithContext(ctx, c.enqueueAll, c.cfg.Resync)
	<-ctx.Done()
	return nil
}

// enqueueAll queues every quota, for the periodic full recount.
func (c *Controller) enqueueAll(context.Context) {
	all, err := c.quotas.List(labels.Everything())
	if err != nil {
		return
	}
	for _, rq := range all {
		worker.Enqueue(c.queue, rq)
	}
}

// enqueueNamespace queues the quotas of ns.
func (c *Controller) enqueueNamespace(ns string) {
	list, err := c.quotas.ResourceQuotas(ns).List(labels.Everything())
	if err != nil {
		return
	}
	for _, rq := range list {
		worker.Enqueue(c.queue, rq)
	}
}

// sync recomputes one quota's usage and writes its status if it changed.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	rq, err := c.quotas.ResourceQuotas(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	registry, err := c.registryFor(rq.Spec.Hard)
	if err != nil {
		return err
	}
	observed, calcErr := quota.CalculateUsage(ns, rq.Spec.Scopes, rq.Spec.Hard, registry, rq.Spec.ScopeSelector)
	status, dirty := desiredStatus(rq, observed)
	if dirty {
		update := rq.DeepCopy()
		update.Status = status
		if _, err := c.client.CoreV1().ResourceQuotas(ns).UpdateStatus(ctx, update, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("update status of quota %s: %w", key, err)
		}
		c.log.DebugContext(ctx, "quota status updated", "quota", key, "used", status.Used)
	}
	if calcErr != nil {
		return fmt.Errorf("usage of quota %s: %w", key, calcErr)
	}
	if dirty && gaveBack(rq.Status.Used, status.Used) {
		return worker.RequeueAfter(recountAfterGiveBack)
	}
	return nil
}

// registryFor is the evaluators a quota with these hard resources needs: the built-in
// ones and an object count for each count/<resource>.<group> of another kind. It fails
// with errCacheNotSynced while one of their kinds is still being listed.
func (c *Controller) registryFor(hard corev1.ResourceList) (quota.Registry, error) {
	evaluators := append([]quota.Evaluator{}, c.evaluators...)
	for name := range hard {
		gr, ok := quotaeval.CountedResource(name)
		if !ok || c.byResource[gr] != nil {
			continue
		}
		gvr, err := c.mapper.ResourceFor(gr.WithVersion(""))
		if err != nil {
			// Not served (yet): nothing of it can exist, and discovery is asked again next time.
			c.mapper.Reset()
			continue
		}
		evaluators = append(evaluators, generic.NewObjectCountEvaluator(gr, generic.ListResourceUsingListerFunc(c.listerFor, gvr), ""))
		if _, err := c.listerFor(gvr); err != nil {
			return nil, err
		}
	}
	return generic.NewRegistry(evaluators), nil
}

// listerFor lists a kind from the shared factory, watching it from the first call on.
func (c *Controller) listerFor(gvr schema.GroupVersionResource) (cache.GenericLister, error) {
	inf, err := c.watch(gvr)
	if err != nil {
		return nil, err
	}
	if !inf.Informer().HasSynced() {
		return nil, fmt.Errorf("%s: %w", gvr, errCacheNotSynced)
	}
	return inf.Lister(), nil
}

// watch returns the informer of gvr, registering the handler that requeues the quotas
// of a namespace when usage there is freed, and starting it if the controller runs.
func (c *Controller) watch(gvr schema.GroupVersionResource) (informers.GenericInformer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if inf, ok := c.watched[gvr]; ok {
		return inf, nil
	}
	inf, err := c.factory.ForResource(gvr)
	if err != nil {
		return nil, fmt.Errorf("resourcequota: watch %s: %w", gvr, err)
	}
	gr := gvr.GroupResource()
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur interface{}) {
			if c.usageChanged(gr, old, cur) {
				c.enqueueFor(cur)
			}
		},
		DeleteFunc: c.enqueueFor,
	}); err != nil {
		return nil, fmt.Errorf("resourcequota: watch %s: %w", gvr, err)
	}
	c.watched[gvr] = inf
	if c.stop != nil {
		c.factory.Start(c.stop)
	}
	return inf, nil
}

// enqueueFor queues the quotas of obj's namespace; obj may be a delete tombstone.
func (c *Controller) enqueueFor(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if m, err := meta.Accessor(obj); err == nil && m.GetNamespace() != "" {
		c.enqueueNamespace(m.GetNamespace())
	}
}

// usageChanged says whether an update changed what the object takes from a quota (a
// pod reaching a terminal phase, a service changing type, a claim growing). Additions
// are charged by admission; recounting on them would race with objects admitted but
// not yet in the cache.
func (c *Controller) usageChanged(gr schema.GroupResource, old, cur interface{}) bool {
	e := c.byResource[gr]
	o, ok1 := old.(runtime.Object)
	n, ok2 := cur.(runtime.Object)
	if e == nil || !ok1 || !ok2 {
		return false
	}
	ou, err1 := e.Usage(o)
	nu, err2 := e.Usage(n)
	return err1 == nil && err2 == nil && !quota.Equals(ou, nu)
}
