package overlay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/knftables"

	"github.com/kubelab/kubelab/internal/util/netns"
	"github.com/kubelab/kubelab/internal/util/worker"
)

// resyncKey is the queue key of a whole-state resync; no Node has an empty name.
const resyncKey = ""

// Agent links its node's pod subnet with every other node's.
type Agent struct {
	cfg     Config
	cluster netip.Prefix
	client  kubernetes.Interface
	factory informers.SharedInformerFactory
	lister  corelisters.NodeLister
	synced  cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[string]
	log     *slog.Logger

	// Set by Run; after that only the one worker touches them.
	dp        *dataplane
	nft       *nftables
	underlay  underlayLink
	vx        int                // ifindex of the VXLAN device; 0 in direct mode
	own       netip.Prefix       // the own node's pod subnet, once known
	installed map[string]entries // remote node → the entries set for it
	skipped   map[string]string  // remote node → why it has no entries, as last logged
}

// New returns an agent for cfg that watches Nodes through client. Run starts it.
func New(cfg Config, client kubernetes.Interface) (*Agent, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("overlay: %w", err)
	}
	cluster, _ := parseClusterCIDR(cfg.ClusterCIDR)
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Core().V1().Nodes()
	a := &Agent{
		cfg: cfg, cluster: cluster, client: client, factory: factory,
		lister: inf.Lister(), synced: inf.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "overlay"}),
		log:       cfg.Logger.With("mode", cfg.Mode),
		installed: map[string]entries{},
		skipped:   map[string]string{},
	}
	_, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { a.queue.Add(obj.(*corev1.Node).Name) },
		UpdateFunc: func(old, cur interface{}) {
			if changed(old.(*corev1.Node), cur.(*corev1.Node)) {
				a.queue.Add(cur.(*corev1.Node).Name)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				a.queue.Add(n.Name)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("overlay: %w", err)
	}
	return a, nil
}

// changed says whether a Node update touches what the overlay reads: the podCIDR
// and the overlay annotations (status heartbeats do not).
func changed(old, cur *corev1.Node) bool {
	return old.Spec.PodCIDR != cur.Spec.PodCIDR ||
		old.Annotations[AnnotationNodeIP] != cur.Annotations[AnnotationNodeIP] ||
		old.Annotations[AnnotationVTEPMAC] != cur.Annotations[AnnotationVTEPMAC]
}

// Run sets up the node (the VXLAN device in vxlan mode, the masquerade table),
// removes entries of nodes the API no longer has, then keeps one set of entries per
// remote node until ctx ends. It fails at once when the node cannot be set up (no
// namespace, no underlay, no nft). An Agent runs once.
func (a *Agent) Run(ctx context.Context) error {
	h, err := netns.Handle(a.cfg.NetNS)
	if err != nil {
		return fmt.Errorf("overlay: %w", err)
	}
	defer h.Close()
	a.dp = &dataplane{h: h, device: a.cfg.Device, underlay: a.cfg.Underlay, cluster: a.cluster}
	if err := a.setUp(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while setting up
		}
		return fmt.Errorf("overlay: %w", err)
	}

	defer a.queue.ShutDown()
	a.factory.Start(ctx.Done())
	defer a.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), a.synced) {
		return nil // ctx ended first
	}
	a.log.Info("overlay agent started", "underlay", a.cfg.Underlay, "nodeIP", a.underlay.ip, "device", a.cfg.Device)
	a.queue.Add(resyncKey)

	var wg sync.WaitGroup
	wg.Go(func() { worker.Work(ctx, a.queue, a.sync, a.failed) })
	wg.Go(func() {
		t := time.NewTicker(a.cfg.ResyncPeriod)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				a.queue.Add(resyncKey)
			}
		}
	})
	<-ctx.Done()
	a.queue.ShutDown()
	wg.Wait()
	return nil
}

// setUp makes the node's device and table, before any Node is looked at.
func (a *Agent) setUp(ctx context.Context) error {
	var err error
	if a.nft, err = newNFTables(a.cfg.NetNS); err != nil {
		return err
	}
	created, err := a.ensureDevice()
	if err != nil {
		return err
	}
	if err := a.ensureMasquerade(ctx); err != nil {
		if created {
			// Leave the node as it was found.
			if _, rerr := a.dp.removeDevice(); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
		return err
	}
	return nil
}

func (a *Agent) failed(ctx context.Context, key string, err error) {
	if ctx.Err() != nil {
		return // stopping: the failure is the cancellation's
	}
	if key == resyncKey {
		key = "(resync)"
	}
	a.log.Error("overlay sync failed, will retry", "key", key, "err", err)
}

// sync reconciles one queue key: the whole state, the own node or a remote node.
func (a *Agent) sync(ctx context.Context, key string) error {
	if key == resyncKey {
		return a.resync(ctx)
	}
	created, err := a.ensureDevice()
	if err != nil {
		return err
	}
	if created {
		// The entries went with the old device.
		return a.resync(ctx)
	}
	if key == a.cfg.NodeName {
		ownChanged, err := a.syncSelf(ctx)
		if err == nil && ownChanged {
			// Which remote subnets are allowed depends on the own one.
			return a.resync(ctx)
		}
		return err
	}
	return a.syncRemote(key)
}

// ensureDevice reads the underlay and makes the VXLAN device (vxlan mode) or
// removes a left-over one (direct mode). It says whether the device was made anew.
func (a *Agent) ensureDevice() (bool, error) {
	u, err := a.dp.underlayInfo()
	if err != nil {
		return false, err
	}
	a.underlay = u
	if a.cfg.Mode == ModeDirect {
		removed, err := a.dp.removeDevice()
		if removed {
			a.log.Info("removed the vxlan device of an earlier vxlan mode", "device", a.cfg.Device)
		}
		a.vx = 0
		return false, err
	}
	mtu := u.mtu - vxlanOverhead
	if mtu < 68 {
		return false, fmt.Errorf("underlay %s mtu %d leaves %d for %s, below IPv4's 68", a.cfg.Underlay, u.mtu, mtu, a.cfg.Device)
	}
	spec := vxlanSpec{name: a.cfg.Device, vni: a.cfg.VNI, port: a.cfg.Port, mac: vtepMAC(a.cfg.NodeName),
		local: u.ip, underlay: u.index, mtu: mtu}
	idx, created, reason, err := a.dp.ensureVXLAN(spec)
	if reason != nil {
		a.log.Info("vxlan device differs from the config, making it again", "device", a.cfg.Device, "diff", reason)
	}
	if err != nil {
		return false, err
	}
	if created {
		a.log.Info("vxlan device made", "device", a.cfg.Device, "vni", spec.vni, "local", spec.local,
			"dstport", spec.port, "mac", spec.mac.String(), "mtu", mtu)
	}
	a.vx = idx
	return created, nil
}

func (a *Agent) ensureMasquerade(ctx context.Context) error {
	err := a.nft.run(ctx, func(tx *knftables.Transaction) { masqueradeRules(tx, a.cluster, a.cfg.Underlay) })
	if err != nil {
		return fmt.Errorf("masquerade table %s: %w", TableName, err)
	}
	return nil
}

func (a *Agent) planner() planner {
	return planner{mode: a.cfg.Mode, device: a.cfg.Device, underlay: a.cfg.Underlay,
		cluster: a.cluster, self: a.cfg.NodeName, own: a.own}
}

func (a *Agent) devices() map[string]int {
	return map[string]int{a.cfg.Device: a.vx, a.cfg.Underlay: a.underlay.index}
}

// syncSelf gives the VXLAN device its address in the own pod subnet and publishes
// the own node's annotations. It says whether the own pod subnet changed.
func (a *Agent) syncSelf(ctx context.Context) (bool, error) {
	node, err := a.lister.Get(a.cfg.NodeName)
	if apierrors.IsNotFound(err) {
		a.log.Debug("own node not registered yet")
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var own netip.Prefix
	if node.Spec.PodCIDR != "" {
		if own, err = a.planner().podSubnet(node.Spec.PodCIDR); err != nil {
			a.log.Warn("own podCIDR unusable", "err", err)
		}
	}
	mac := ""
	if a.cfg.Mode == ModeVXLAN {
		var addr netip.Addr
		if own.IsValid() {
			addr = own.Addr()
		}
		if err := a.dp.ensureAddress(a.vx, addr); err != nil {
			return false, err
		}
		mac = vtepMAC(a.cfg.NodeName).String()
	}
	published, err := publish(ctx, a.client, node, mac, a.underlay.ip.String())
	if err != nil {
		return false, err
	}
	if published {
		a.log.Info("node annotations published", AnnotationNodeIP, a.underlay.ip, AnnotationVTEPMAC, mac)
	}
	ownChanged := own != a.own
	a.own = own
	return ownChanged, nil
}

// syncRemote sets the entries of remote node name and deletes those it had and no
// longer wants (unless another node wants the same key now).
func (a *Agent) syncRemote(name string) error {
	node, err := a.lister.Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if apierrors.IsNotFound(err) {
		node = nil
	}
	want := a.plan(name, node)
	have := a.installed[name]
	others := entries{}
	for n, e := range a.installed {
		if n != name {
			others = others.plus(e)
		}
	}
	del := stale(have, want, others)
	if err := a.dp.apply(del, want, a.devices()); err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	if want.empty() {
		delete(a.installed, name)
	} else {
		a.installed[name] = want
	}
	if !del.empty() {
		a.log.Info("entries of remote node removed", "remote", name, "entries", del.String())
	}
	if !want.empty() && !equalEntries(have, want) {
		a.log.Info("entries of remote node set", "remote", name, "entries", want.String())
	}
	return nil
}

// plan returns the entries wanted for remote node name (nil: gone), logging why
// it gets none when that changes.
func (a *Agent) plan(name string, node *corev1.Node) entries {
	want, err := a.planner().forNode(node)
	reason := ""
	if err != nil {
		reason = err.Error()
	}
	if reason != a.skipped[name] {
		switch {
		case errors.Is(err, errIncomplete):
			a.log.Debug("remote node gets no entries yet", "remote", name, "reason", reason)
		case err != nil:
			a.log.Warn("remote node gets no entries", "remote", name, "reason", reason)
		}
	}
	if reason == "" || node == nil {
		delete(a.skipped, name)
	} else {
		a.skipped[name] = reason
	}
	return want
}

// resync compares the whole state with the kernel's and repairs it: the device,
// the masquerade table, the own node, and the entries of every remote node — those
// of nodes the API does not have (left by a crash, or removed while the agent was
// down) are deleted, those removed by hand are set again.
func (a *Agent) resync(ctx context.Context) error {
	if _, err := a.ensureDevice(); err != nil {
		return err
	}
	var errs []error
	if err := a.ensureMasquerade(ctx); err != nil {
		errs = append(errs, err)
	}
	if _, err := a.syncSelf(ctx); err != nil {
		errs = append(errs, err)
	}
	nodes, err := a.lister.List(labels.Everything())
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	want := map[string]entries{}
	var all entries
	for _, n := range nodes {
		if e := a.plan(n.Name, n); !e.empty() {
			want[n.Name] = e
			all = all.plus(e)
		}
	}
	for name := range a.skipped {
		if _, err := a.lister.Get(name); apierrors.IsNotFound(err) {
			delete(a.skipped, name)
		}
	}
	actual, err := a.dp.list(a.vx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	del, set := stale(actual, all), missing(actual, all)
	if err := a.dp.apply(del, set, a.devices()); err != nil {
		errs = append(errs, err)
	}
	a.installed = want
	if !del.empty() {
		a.log.Info("resync removed entries no node wants", "entries", del.String())
	}
	if !set.empty() {
		a.log.Info("resync set entries", "entries", set.String())
	}
	return errors.Join(errs...)
}

func equalEntries(a, b entries) bool {
	return missing(a, b).empty() && missing(b, a).empty()
}
