package garbagecollector

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubelab/kubelab/internal/util/worker"
)

// Config tunes the collector.
type Config struct {
	// Workers is the number of objects examined at once (10 when zero).
	Workers int
	// DiscoveryPeriod is how often resources are discovered again (30 s when zero).
	DiscoveryPeriod time.Duration
	// Ignored resources are not watched (events, as upstream, when nil).
	Ignored []schema.GroupResource
}

func (c *Config) validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("garbage collector: workers %d < 0", c.Workers)
	}
	if c.DiscoveryPeriod < 0 {
		return fmt.Errorf("garbage collector: discovery period %v < 0", c.DiscoveryPeriod)
	}
	return nil
}

// Controller is the garbage collector.
type Controller struct {
	cfg       Config
	metadata  metadata.Interface
	discovery discovery.DiscoveryInterface
	mapper    *restmapper.DeferredDiscoveryRESTMapper
	factory   metadatainformer.SharedInformerFactory
	graph     *graph

	attemptToDelete workqueue.TypedRateLimitingInterface[types.UID]
	attemptToOrphan workqueue.TypedRateLimitingInterface[types.UID]

	mu       sync.Mutex
	monitors map[schema.GroupVersionResource]cache.SharedIndexInformer
}

// New builds the collector on a discovery client and the metadata client; its
// informers are its own (metadata informers over discovered resources), started by Run.
func New(cfg Config, disc discovery.DiscoveryInterface, md metadata.Interface) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Workers == 0 {
		cfg.Workers = 10
	}
	if cfg.DiscoveryPeriod == 0 {
		cfg.DiscoveryPeriod = 30 * time.Second
	}
	if cfg.Ignored == nil {
		cfg.Ignored = []schema.GroupResource{{Resource: "events"}, {Group: "events.k8s.io", Resource: "events"}}
	}
	cached := memory.NewMemCacheClient(disc)
	return &Controller{
		cfg: cfg, metadata: md, discovery: disc,
		mapper:  restmapper.NewDeferredDiscoveryRESTMapper(cached),
		factory: metadatainformer.NewSharedInformerFactory(md, 0),
		graph:   newGraph(),
		attemptToDelete: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.UID](),
			workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "garbage_collector_attempt_to_delete"}),
		attemptToOrphan: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.UID](),
			workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "garbage_collector_attempt_to_orphan"}),
		monitors: map[schema.GroupVersionResource]cache.SharedIndexInformer{},
	}, nil
}

// Run watches every deletable resource and collects garbage until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.attemptToDelete.ShutDown()
	defer c.attemptToOrphan.ShutDown()
	defer c.factory.Shutdown()
	// The first discovery must succeed: without it there is nothing to watch.
	if err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.syncMonitors(ctx); err != nil {
			slog.WarnContext(ctx, "garbage collector: discovery failed", "err", err)
			return false, nil
		}
		return true, nil
	}); err != nil {
		return fmt.Errorf("garbage collector: %w", err)
	}
	if !cache.WaitForCacheSync(ctx.Done(), c.hasSynced) {
		return fmt.Errorf("garbage collector: caches did not sync: %w", ctx.Err())
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.syncMonitors(ctx); err != nil {
			slog.WarnContext(ctx, "garbage collector: rediscovery failed", "err", err)
		}
	}, c.cfg.DiscoveryPeriod)
	worker.Start(ctx, c.cfg.Workers, c.attemptToDelete, c.attemptDelete, func(ctx context.Context, uid types.UID, err error) {
		slog.InfoContext(ctx, "garbage collector: will retry", "uid", uid, "err", err)
	})
	worker.Start(ctx, c.cfg.Workers, c.attemptToOrphan, c.orphan, func(ctx context.Context, uid types.UID, err error) {
		slog.InfoContext(ctx, "garbage collector: will retry orphaning", "uid", uid, "err", err)
	})
	<-ctx.Done()
	return nil
}

// hasSynced says whether every monitor has listed its resource once.
func (c *Controller) hasSynced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, inf := range c.monitors {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

// syncMonitors starts a metadata informer for each deletable resource not yet watched.
func (c *Controller) syncMonitors(ctx context.Context) error {
	lists, err := c.discovery.ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		return fmt.Errorf("discover resources: %w", err)
	}
	c.mapper.Reset()
	ignored := sets.New(c.cfg.Ignored...)
	c.mu.Lock()
	defer c.mu.Unlock()
	added := 0
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			verbs := sets.New(r.Verbs...)
			if !verbs.HasAll("list", "watch", "delete") || ignored.Has(gv.WithResource(r.Name).GroupResource()) {
				continue
			}
			gvr := gv.WithResource(r.Name)
			if _, ok := c.monitors[gvr]; ok {
				continue
			}
			inf := c.factory.ForResource(gvr).Informer()
			if _, err := inf.AddEventHandler(c.handler(gvr)); err != nil {
				return err
			}
			c.monitors[gvr] = inf
			added++
		}
	}
	if added > 0 {
		slog.InfoContext(ctx, "garbage collector: watching resources", "added", added, "total", len(c.monitors))
		c.factory.Start(ctx.Done())
	}
	return nil
}

// handler keeps the graph and queues the work each change calls for.
func (c *Controller) handler(gvr schema.GroupVersionResource) cache.ResourceEventHandler {
	toNode := func(obj interface{}) *node {
		m, err := metaOf(obj)
		if err != nil {
			return nil
		}
		return &node{gvr: gvr, namespace: m.GetNamespace(), name: m.GetName(), uid: m.GetUID(),
			owners: m.GetOwnerReferences(), deleting: m.GetDeletionTimestamp() != nil, finalizers: m.GetFinalizers()}
	}
	upsert := func(obj interface{}) {
		n := toNode(obj)
		if n == nil {
			return
		}
		old := c.graph.upsert(n)
		if len(n.owners) > 0 && (old == nil || ownersChanged(old.owners, n.owners)) {
			c.attemptToDelete.Add(n.uid)
		}
		if old != nil {
			// References dropped from n: those owners may be waiting on it.
			for _, r := range old.owners {
				if !hasOwner(n.owners, r.UID) {
					c.wakeOwner(r.UID)
				}
			}
		}
		if n.deleting && hasString(n.finalizers, metav1.FinalizerOrphanDependents) {
			c.attemptToOrphan.Add(n.uid)
		}
		if n.deletingDependents() {
			c.attemptToDelete.Add(n.uid)
		}
		if n.deleting {
			// A dependent on its way out may be what a waiting owner needs.
			for _, r := range n.owners {
				c.wakeOwner(r.UID)
			}
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    upsert,
		UpdateFunc: func(_, obj interface{}) { upsert(obj) },
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			m, err := metaOf(obj)
			if err != nil {
				return
			}
			n := c.graph.remove(m.GetUID())
			if n == nil {
				return
			}
			for dep := range c.graph.dependentsOf(n.uid) {
				c.attemptToDelete.Add(dep)
			}
			for _, r := range n.owners {
				c.wakeOwner(r.UID)
			}
		},
	}
}

// wakeOwner queues owner if it is waiting for its dependents.
func (c *Controller) wakeOwner(owner types.UID) {
	if o := c.graph.get(owner); o != nil && o.deletingDependents() {
		c.attemptToDelete.Add(owner)
	}
}

func hasOwner(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid {
			return true
		}
	}
	return false
}

func metaOf(obj interface{}) (metav1.Object, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		return m, nil
	}
	if m, ok := obj.(metav1.Object); ok {
		return m, nil
	}
	return nil, fmt.Errorf("not an object: %T", obj)
}
