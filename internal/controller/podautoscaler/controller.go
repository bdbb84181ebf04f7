package podautoscaler

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/kubelab/kubelab/internal/util/worker"
)

// Controller reconciles HorizontalPodAutoscalers.
type Controller struct {
	cfg       Config
	clients   Clients
	hpaLister autoscalinglisters.HorizontalPodAutoscalerLister
	podLister corelisters.PodLister
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]

	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	// selectors are the pod selectors of the autoscalers' targets, to refuse targets
	// whose pods two autoscalers select.
	selectors *selectorStore

	mu sync.Mutex
	// recommendations are each autoscaler's recent unstabilized recommendations; ups and
	// downs its recent rescales (only kept for autoscalers with a behavior).
	recommendations map[string][]recommendation
	ups, downs      map[string][]scaleEvent
}

// New registers the controller's informers and handlers on factory; the caller starts
// the factory after every New.
func New(cfg Config, clients Clients, factory informers.SharedInformerFactory) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := clients.validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	hpaInf := factory.Autoscaling().V2().HorizontalPodAutoscalers()
	podInf := factory.Core().V1().Pods()
	queueCfg := workqueue.TypedRateLimitingQueueConfig[string]{Name: "horizontalpodautoscaler"}
	if c, ok := cfg.Clock.(clock.WithTicker); ok {
		queueCfg.Clock = c
	}
	broadcaster := record.NewBroadcaster()
	c := &Controller{
		cfg: cfg, clients: clients,
		hpaLister: hpaInf.Lister(), podLister: podInf.Lister(),
		synced: []cache.InformerSynced{hpaInf.Informer().HasSynced, podInf.Informer().HasSynced},
		// Every autoscaler is looked at again one sync period after each sync (or failure).
		queue:           workqueue.NewTypedRateLimitingQueueWithConfig[string](fixedInterval(cfg.SyncPeriod), queueCfg),
		broadcaster:     broadcaster,
		recorder:        broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: ComponentName}),
		selectors:       newSelectorStore(),
		recommendations: map[string][]recommendation{},
		ups:             map[string][]scaleEvent{},
		downs:           map[string][]scaleEvent{},
	}
	if _, err := hpaInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addHPA,
		UpdateFunc: c.updateHPA,
		DeleteFunc: c.deleteHPA,
	}); err != nil {
		return nil, fmt.Errorf("horizontal pod autoscaler: %w", err)
	}
	// The pods are read from the cache; their events need no reaction.
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{}); err != nil {
		return nil, fmt.Errorf("horizontal pod autoscaler: %w", err)
	}
	return c, nil
}

// Run waits for the caches, then reconciles autoscalers until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.clients.Kube.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("horizontal pod autoscaler: caches did not sync: %w", ctx.Err())
	}
	c.cfg.Logger.InfoContext(ctx, "starting HPA controller", "workers", c.cfg.Workers, "syncPeriod", c.cfg.SyncPeriod)
	worker.Start(ctx, c.cfg.Workers, c.queue, c.syncAndRequeue, worker.Failed("horizontal pod autoscaler", "hpa", apierrors.IsConflict))
	<-ctx.Done()
	return nil
}

// syncAndRequeue reconciles an autoscaler and looks at it again a sync period later
// while it exists.
func (c *Controller) syncAndRequeue(ctx context.Context, key string) error {
	deleted, err := c.sync(ctx, key)
	if !deleted && err == nil {
		c.queue.AddAfter(key, c.cfg.SyncPeriod)
	}
	return err
}

func (c *Controller) addHPA(obj interface{}) {
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

// updateHPA reconciles a changed spec at once; other updates (the controller's own
// status writes, resyncs) wait for the autoscaler's next period.
func (c *Controller) updateHPA(oldObj, newObj interface{}) {
	old, ok1 := oldObj.(*autoscalingv2.HorizontalPodAutoscaler)
	cur, ok2 := newObj.(*autoscalingv2.HorizontalPodAutoscaler)
	key, err := cache.MetaNamespaceKeyFunc(newObj)
	if err != nil {
		return
	}
	if ok1 && ok2 && old.Generation != cur.Generation {
		c.queue.Add(key)
		return
	}
	c.queue.AddRateLimited(key)
}

func (c *Controller) deleteHPA(obj interface{}) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	c.queue.Forget(key)
	c.selectors.delete(key)
	c.queue.Add(key)
}

// forget drops what the controller remembers of a deleted autoscaler.
func (c *Controller) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.recommendations, key)
	delete(c.ups, key)
	delete(c.downs, key)
	c.selectors.delete(key)
}

// fixedInterval is a rate limiter that always waits the same interval.
type fixedInterval time.Duration

func (f fixedInterval) When(string) time.Duration { return time.Duration(f) }
func (f fixedInterval) NumRequeues(string) int    { return 1 }
func (f fixedInterval) Forget(string)             {}

// selectorStore holds the pod selector of each autoscaler's target, by namespace.
type selectorStore struct {
	mu        sync.Mutex
	selectors map[string]map[string]labels.Selector // namespace → autoscaler key → selector
}

func newSelectorStore() *selectorStore {
	return &selectorStore{selectors: map[string]map[string]labels.Selector{}}
}

func (s *selectorStore) put(namespace, key string, sel labels.Selector) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.selectors[namespace] == nil {
		s.selectors[namespace] = map[string]labels.Selector{}
	}
	s.selectors[namespace][key] = sel
}

func (s *selectorStore) delete(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.selectors {
		delete(m, key)
	}
}

// selecting are the autoscalers (keys, sorted) whose selectors pick one of the pods.
func (s *selectorStore) selecting(namespace string, pods []*corev1.Pod) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for key, sel := range s.selectors[namespace] {
		for _, p := range pods {
			if sel.Matches(labels.Set(p.Labels)) {
				out = append(out, key)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}
