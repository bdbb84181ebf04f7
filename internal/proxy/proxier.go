package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/knftables"

	"github.com/kubelab/kubelab/internal/util/netns"
)

// byServiceIndex indexes EndpointSlices by "<namespace>/<Service name>".
const byServiceIndex = "service"

// Proxier is one node's service proxy.
type Proxier struct {
	cfg    Config
	client kubernetes.Interface
	log    *slog.Logger
	syncer *syncer

	// Set by Run before the first sync.
	services corelisters.ServiceLister
	slices   cache.Indexer

	mu sync.Mutex
	// dirty are the Services whose Service or EndpointSlices changed since the last sync.
	dirty map[types.NamespacedName]bool
	// kick wakes the sync loop (buffered: one pending wake-up is enough).
	kick chan struct{}

	running atomic.Bool
	synced  atomic.Bool

	health *healthServers
	// conntrack: delete stale UDP conntrack entries in cfg.NetNS after each sync.
	conntrack bool

	// onSync, when set (by benchmarks), learns of each sync that wrote the table: whether
	// it was full and how long it took from reading the informers' caches to nft's end.
	onSync func(full bool, elapsed time.Duration)
}

// New makes the proxy of cfg.NodeName; its nft commands run in cfg.NetNS. It fails when
// nft cannot be used there.
func New(cfg Config, client kubernetes.Interface) (*Proxier, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	nft, err := newNFTables(cfg.NetNS, cfg.Table)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	p, err := newProxier(cfg, client, nft)
	if err != nil {
		return nil, err
	}
	p.syncer.joinElements = true
	p.conntrack = true
	return p, nil
}

// NewWithNFTables is New writing through nft (a knftables.NewFake(knftables.IPv4Family,
// table) in tests) instead of the nft binary in cfg.NetNS.
func NewWithNFTables(cfg Config, client kubernetes.Interface, nft knftables.Interface) (*Proxier, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if nft == nil {
		return nil, errors.New("proxy: nftables interface is nil")
	}
	return newProxier(cfg, client, nft)
}

func newProxier(cfg Config, client kubernetes.Interface, nft knftables.Interface) (*Proxier, error) {
	if client == nil {
		return nil, errors.New("proxy: kubernetes client is nil")
	}
	log := cfg.Logger.With("component", "proxy", "node", cfg.NodeName)
	return &Proxier{
		cfg:    cfg,
		client: client,
		log:    log,
		syncer: newSyncer(nft, cfg.NodeIPs, cfg.ClusterCIDR, log),
		dirty:  map[types.NamespacedName]bool{},
		kick:   make(chan struct{}, 1),
		health: &healthServers{netns: cfg.NetNS, log: log},
	}, nil
}

// HasSynced reports whether the table has been written once from the complete lists of
// Services and EndpointSlices.
func (p *Proxier) HasSynced() bool { return p.synced.Load() }

// Run watches Services and EndpointSlices and keeps the table in step until ctx ends: a
// full sync once both lists are complete, then after each change a sync of the changed
// Services (bursts of changes are batched, at most one sync per MinSyncPeriod after two
// in a row), a full resync every SyncPeriod, and a full one after a failed sync (retried
// with backoff). It leaves the table in place when it returns.
func (p *Proxier) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return errors.New("proxy: Run called twice")
	}
	factory := informers.NewSharedInformerFactory(p.client, 0)
	svcInformer := factory.Core().V1().Services()
	sliceInformer := factory.Discovery().V1().EndpointSlices()
	if err := sliceInformer.Informer().AddIndexers(cache.Indexers{byServiceIndex: sliceServiceIndex}); err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	p.services = svcInformer.Lister()
	p.slices = sliceInformer.Informer().GetIndexer()

	_, err := svcInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    p.serviceChanged,
		UpdateFunc: func(_, cur any) { p.serviceChanged(cur) },
		DeleteFunc: p.serviceChanged,
	})
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	_, err = sliceInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: p.sliceChanged,
		UpdateFunc: func(old, cur any) {
			p.sliceChanged(old)
			p.sliceChanged(cur)
		},
		DeleteFunc: p.sliceChanged,
	})
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}

	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer p.health.close(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), svcInformer.Informer().HasSynced, sliceInformer.Informer().HasSynced) {
		return nil
	}
	p.loop(ctx)
	return nil
}

// loop syncs on every wake-up, the first time at once.
func (p *Proxier) loop(ctx context.Context) {
	var limiter *rate.Limiter
	if p.cfg.MinSyncPeriod > 0 {
		limiter = rate.NewLimiter(rate.Every(p.cfg.MinSyncPeriod), 2)
	}
	resync := time.NewTimer(p.cfg.SyncPeriod)
	defer resync.Stop()
	var retry <-chan time.Time
	backoff := time.Duration(0)
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-p.kick:
			case <-resync.C:
				p.syncer.needFull = true
			case <-retry:
				retry = nil
			}
		}
		if limiter != nil {
			if err := limiter.Wait(ctx); err != nil {
				return
			}
		}
		full, err := p.syncOnce(ctx)
		if full {
			resync.Reset(p.cfg.SyncPeriod)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, time.Second, p.cfg.MinSyncPeriod), p.cfg.SyncPeriod)
			p.log.Error("sync failed; a full sync follows", "err", err, "retryIn", backoff)
			retry = time.After(backoff)
			continue
		}
		backoff = 0
	}
}

// syncOnce writes the changes gathered since the last sync, or everything when a full
// sync is due; full reports which it was.
func (p *Proxier) syncOnce(ctx context.Context) (full bool, err error) {
	p.mu.Lock()
	dirty := p.dirty
	p.dirty = map[types.NamespacedName]bool{}
	p.mu.Unlock()

	start := time.Now()
	full = p.syncer.needFull
	var stats syncStats
	// What the table held, and what it holds after the sync, of the Services written.
	before := maps.Clone(p.syncer.applied)
	var after map[types.NamespacedName]*ServiceState
	if full {
		svcs, err := p.services.List(labels.Everything())
		if err != nil {
			return true, p.syncer.failed(fmt.Errorf("list services: %w", err))
		}
		desired := make(map[types.NamespacedName]*ServiceState, len(svcs))
		for _, svc := range svcs {
			k := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
			if st := ComputeServiceState(svc, p.slicesOf(k), p.cfg.params()); st != nil {
				desired[k] = st
			}
		}
		if stats, err = p.syncer.fullSync(ctx, desired); err != nil {
			return true, err
		}
		after = desired
		for k := range before {
			if _, ok := after[k]; !ok {
				after[k] = nil
			}
		}
	} else {
		if len(dirty) == 0 {
			return false, nil
		}
		changes := make(map[types.NamespacedName]*ServiceState, len(dirty))
		for k := range dirty {
			svc, err := p.services.Services(k.Namespace).Get(k.Name)
			if err != nil && !apierrors.IsNotFound(err) {
				return false, p.syncer.failed(fmt.Errorf("get service %s: %w", k, err))
			}
			changes[k] = nil
			if svc != nil {
				changes[k] = ComputeServiceState(svc, p.slicesOf(k), p.cfg.params())
			}
		}
		if stats, err = p.syncer.partialSync(ctx, changes); err != nil {
			return false, err
		}
		after = changes
	}
	level := slog.LevelDebug
	if !p.synced.Load() {
		level = slog.LevelInfo
	}
	elapsed := time.Since(start)
	p.log.Log(ctx, level, "nftables synced", "full", full, "services", stats.services,
		"operations", stats.operations, "elapsed", elapsed)
	if p.onSync != nil {
		p.onSync(full, elapsed)
	}
	p.synced.Store(true)
	p.deleteStaleUDPFlows(before, after)
	p.updateHealthChecks()
	return full, nil
}

// deleteStaleUDPFlows deletes the UDP conntrack entries the sync from before to after made
// stale (staleUDPFlows), as kube-proxy does, in the node's namespace; a failure is logged
// and not retried. A proxier writing to a fake table (NewWithNFTables) has no conntrack.
func (p *Proxier) deleteStaleUDPFlows(before, after map[types.NamespacedName]*ServiceState) {
	if !p.conntrack {
		return
	}
	var flows []staleFlow
	for k, cur := range after {
		flows = append(flows, staleUDPFlows(before[k], cur)...)
	}
	if err := deleteUDPFlows(p.cfg.NetNS, flows); err != nil {
		p.log.Warn("UDP conntrack cleanup failed", "err", err)
	}
}

// updateHealthChecks serves the health check node ports of the Services as they are now.
func (p *Proxier) updateHealthChecks() {
	svcs, err := p.services.List(labels.Everything())
	if err != nil {
		return
	}
	p.health.update(healthCheckPorts(svcs, func(s *v1.Service) []*discovery.EndpointSlice {
		return p.slicesOf(types.NamespacedName{Namespace: s.Namespace, Name: s.Name})
	}, p.cfg.NodeName))
}

// slicesOf are the EndpointSlices of the Service k.
func (p *Proxier) slicesOf(k types.NamespacedName) []*discovery.EndpointSlice {
	objs, err := p.slices.ByIndex(byServiceIndex, k.String())
	if err != nil {
		return nil
	}
	out := make([]*discovery.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		if s, ok := o.(*discovery.EndpointSlice); ok {
			out = append(out, s)
		}
	}
	return out
}

func (p *Proxier) serviceChanged(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return
	}
	p.markDirty(types.NamespacedName{Namespace: ns, Name: name})
}

func (p *Proxier) sliceChanged(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	s, ok := obj.(*discovery.EndpointSlice)
	if !ok || s.Labels[serviceNameLabel] == "" {
		return
	}
	p.markDirty(types.NamespacedName{Namespace: s.Namespace, Name: s.Labels[serviceNameLabel]})
}

func (p *Proxier) markDirty(k types.NamespacedName) {
	p.mu.Lock()
	p.dirty[k] = true
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// sliceServiceIndex indexes an EndpointSlice by the Service its label names.
func sliceServiceIndex(obj any) ([]string, error) {
	s, ok := obj.(*discovery.EndpointSlice)
	if !ok || s.Labels[serviceNameLabel] == "" {
		return nil, nil
	}
	return []string{s.Namespace + "/" + s.Labels[serviceNameLabel]}, nil
}

// newNFTables opens the proxy's table (family ip) in the namespace at path ("" = the
// caller's), listing through netlink.
func newNFTables(path, table string) (knftables.Interface, error) {
	return netns.NFTables(path, knftables.IPv4Family, table, knftables.UseNetlink)
}
