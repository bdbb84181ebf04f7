package netpol

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/knftables"

	"github.com/kubelab/kubelab/internal/util/netns"
	"github.com/kubelab/kubelab/internal/util/worker"
)

// syncKey is the one work queue key: every change leads to a sync of the whole node.
const syncKey = "node"

// Agent enforces NetworkPolicy for the pods of one node.
type Agent struct {
	cfg Config
	log *slog.Logger

	nft        knftables.Interface // injected; nil opens the real table in Run
	factory    informers.SharedInformerFactory
	ownFactory bool

	pods       corelisters.PodLister
	namespaces corelisters.NamespaceLister
	policies   networkinglisters.NetworkPolicyLister
	synced     []cache.InformerSynced

	queue        workqueue.TypedRateLimitingInterface[string]
	full         atomic.Bool // the next sync rewrites the whole table
	syncer       *tableSyncer
	lastProblems string
}

// New builds the agent of cfg.NodeName and registers its informers (Pods, Namespaces,
// NetworkPolicies of the whole cluster).
func New(cfg Config, client kubernetes.Interface, opts ...Option) (*Agent, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if client == nil && o.factory == nil {
		return nil, errors.New("netpol: a client or an informer factory is required")
	}
	cfg.setDefaults()
	a := &Agent{
		cfg: cfg,
		log: cfg.Logger,
		nft: o.nft,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "netpol-" + cfg.NodeName}),
	}
	a.factory = o.factory
	if a.factory == nil {
		a.factory = informers.NewSharedInformerFactory(client, 0)
		a.ownFactory = true
	}
	podInf := a.factory.Core().V1().Pods()
	nsInf := a.factory.Core().V1().Namespaces()
	npInf := a.factory.Networking().V1().NetworkPolicies()
	a.pods, a.namespaces, a.policies = podInf.Lister(), nsInf.Lister(), npInf.Lister()
	a.synced = []cache.InformerSynced{podInf.Informer().HasSynced, nsInf.Informer().HasSynced, npInf.Informer().HasSynced}
	enqueue := func(interface{}) { a.queue.Add(syncKey) }
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandlerFuncs
	}{
		{podInf.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: enqueue, DeleteFunc: enqueue,
			UpdateFunc: func(old, cur interface{}) {
				o, ok1 := old.(*corev1.Pod)
				c, ok2 := cur.(*corev1.Pod)
				if !ok1 || !ok2 || podChanged(o, c) {
					a.queue.Add(syncKey)
				}
			}}},
		{nsInf.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: enqueue, DeleteFunc: enqueue,
			UpdateFunc: func(old, cur interface{}) {
				o, ok1 := old.(*corev1.Namespace)
				c, ok2 := cur.(*corev1.Namespace)
				if !ok1 || !ok2 || !reflect.DeepEqual(o.Labels, c.Labels) {
					a.queue.Add(syncKey)
				}
			}}},
		{npInf.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: enqueue, DeleteFunc: enqueue,
			UpdateFunc: func(_, cur interface{}) { enqueue(cur) }}},
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return nil, fmt.Errorf("netpol: event handler: %w", err)
		}
	}
	return a, nil
}

// podChanged reports whether an update of a pod can change any node's rules.
func podChanged(old, cur *corev1.Pod) bool {
	oa, ook := peerAddr(old)
	ca, cok := peerAddr(cur)
	if oa != ca || ook != cok || old.Spec.NodeName != cur.Spec.NodeName ||
		!reflect.DeepEqual(old.Labels, cur.Labels) {
		return true
	}
	ports := func(p *corev1.Pod) [][]corev1.ContainerPort {
		var out [][]corev1.ContainerPort
		for _, c := range p.Spec.Containers {
			out = append(out, c.Ports)
		}
		for _, c := range p.Spec.InitContainers {
			out = append(out, c.Ports)
		}
		return out
	}
	return !reflect.DeepEqual(ports(old), ports(cur))
}

// Run programs the node's table until ctx ends: once the informers have synced, after
// every relevant change, and in full every FullSyncPeriod. A failed sync is retried with
// backoff, rewriting the whole table. The table stays when Run returns (pods keep their
// protection across restarts); Cleanup removes it.
func (a *Agent) Run(ctx context.Context) error {
	defer a.queue.ShutDown()
	nft := a.nft
	if nft == nil {
		n, err := netns.NFTables(a.cfg.NetNS, knftables.IPv4Family, a.cfg.Table)
		if err != nil {
			return fmt.Errorf("netpol: %w", err)
		}
		nft = n
	}
	a.syncer = &tableSyncer{nft: nft}
	if a.ownFactory {
		a.factory.Start(ctx.Done())
		defer a.factory.Shutdown()
	}
	if !cache.WaitForCacheSync(ctx.Done(), a.synced...) {
		return nil
	}
	a.log.InfoContext(ctx, "started", "table", a.cfg.Table, "netns", a.cfg.NetNS)
	go wait.UntilWithContext(ctx, func(context.Context) {
		a.full.Store(true)
		a.queue.Add(syncKey)
	}, a.cfg.FullSyncPeriod)
	go func() {
		<-ctx.Done()
		a.queue.ShutDown()
	}()
	worker.Work(ctx, a.queue, func(ctx context.Context, _ string) error { return a.sync(ctx) },
		func(ctx context.Context, _ string, err error) {
			if ctx.Err() == nil {
				a.log.ErrorContext(ctx, "sync failed, will retry", "err", err)
			}
		})
	return nil
}

// sync computes the node's rules from the informers' caches and applies them.
func (a *Agent) sync(ctx context.Context) error {
	pods, err := a.pods.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	nss, err := a.namespaces.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list namespaces: %w", err)
	}
	nps, err := a.policies.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list networkpolicies: %w", err)
	}
	d := Compute(Inputs{NodeName: a.cfg.NodeName, Pods: pods, Namespaces: nss, Policies: nps})
	a.reportProblems(ctx, d.Problems)
	full := a.full.Swap(false)
	start := time.Now()
	n, err := a.syncer.apply(ctx, Render(d), full)
	if err != nil {
		a.full.Store(true)
		return err
	}
	if n > 0 {
		a.log.DebugContext(ctx, "synced", "full", full, "operations", n, "isolatedPods", len(d.Pods),
			"duration", time.Since(start))
	}
	return nil
}

// reportProblems logs the problems of a sync when they differ from the last ones.
func (a *Agent) reportProblems(ctx context.Context, problems []error) {
	var msgs []string
	for _, p := range problems {
		msgs = append(msgs, p.Error())
	}
	joined := strings.Join(msgs, "\n")
	if joined == a.lastProblems {
		return
	}
	a.lastProblems = joined
	for _, m := range msgs {
		a.log.WarnContext(ctx, "ignored", "problem", m)
	}
}

// Cleanup deletes the node's table (cfg.Table in cfg.NetNS); a missing table is no error.
func Cleanup(ctx context.Context, cfg Config, opts ...Option) error {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	if !validName(cfg.Table) {
		return fmt.Errorf("netpol cleanup: table %q: want a letter then letters, digits, '-', '_' or '.'", cfg.Table)
	}
	nft := o.nft
	if nft == nil {
		n, err := netns.NFTables(cfg.NetNS, knftables.IPv4Family, cfg.Table)
		if err != nil {
			return fmt.Errorf("netpol cleanup: %w", err)
		}
		nft = n
	}
	tx := nft.NewTransaction()
	tx.Add(&knftables.Table{})
	tx.Delete(&knftables.Table{})
	if err := nft.Run(ctx, tx); err != nil {
		return fmt.Errorf("netpol cleanup: delete table %s: %w", cfg.Table, err)
	}
	return nil
}
