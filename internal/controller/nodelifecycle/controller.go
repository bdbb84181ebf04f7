package nodelifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	coordlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubelab/kubelab/internal/util/worker"
)

// Upstream component names of the Events.
const (
	ComponentName         = "node-controller"
	EvictionComponentName = "taint-eviction-controller"
	LeaseNamespace        = corev1.NamespaceNodeLease // kube-node-lease
)

// Config tunes the controller.
type Config struct {
	// NodeMonitorGracePeriod is how long a node may stay silent before it is Unknown
	// (40 s when zero).
	NodeMonitorGracePeriod time.Duration
	// NodeMonitorPeriod is how often nodes are looked at (5 s when zero).
	NodeMonitorPeriod time.Duration
	// DefaultTolerationSeconds is the not-ready/unreachable toleration of pods that
	// have none (300 when zero).
	DefaultTolerationSeconds int64
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

func (c *Config) validate() error {
	if c.NodeMonitorGracePeriod < 0 || c.NodeMonitorPeriod < 0 || c.DefaultTolerationSeconds < 0 {
		return fmt.Errorf("nodelifecycle: negative durations in %+v", *c)
	}
	return nil
}

// probe is the last heartbeat seen of a node, and when this controller saw it.
type probe struct {
	heartbeat time.Time
	seenAt    time.Time
}

// Controller watches node health, taints and evicts.
type Controller struct {
	cfg         Config
	client      kubernetes.Interface
	nodeLister  corelisters.NodeLister
	leaseLister coordlisters.LeaseLister
	podIndexer  cache.Indexer
	synced      []cache.InformerSynced
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	evictions   record.EventRecorder
	// taints holds the names of nodes whose taints are looked at without waiting for
	// the next pass (a cordon, a Ready change).
	taints workqueue.TypedRateLimitingInterface[string]

	mu     sync.Mutex
	probes map[string]probe
	// known are the nodes the controller has registered (RegisteredNode), by name.
	known map[string]types.UID
}

const byNode = "spec.nodeName"

// New registers the controller's informers on factory.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.NodeMonitorGracePeriod == 0 {
		cfg.NodeMonitorGracePeriod = 40 * time.Second
	}
	if cfg.NodeMonitorPeriod == 0 {
		cfg.NodeMonitorPeriod = 5 * time.Second
	}
	if cfg.DefaultTolerationSeconds == 0 {
		cfg.DefaultTolerationSeconds = 300
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	nodeInf := factory.Core().V1().Nodes()
	leaseInf := factory.Coordination().V1().Leases()
	podInf := factory.Core().V1().Pods()
	if err := podInf.Informer().AddIndexers(cache.Indexers{byNode: func(obj interface{}) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, err
	}
	broadcaster := record.NewBroadcaster()
	c := &Controller{
		cfg: cfg, client: client,
		nodeLister: nodeInf.Lister(), leaseLister: leaseInf.Lister(), podIndexer: podInf.Informer().GetIndexer(),
		synced:      []cache.InformerSynced{nodeInf.Informer().HasSynced, leaseInf.Informer().HasSynced, podInf.Informer().HasSynced},
		broadcaster: broadcaster,
		recorder:    broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: ComponentName}),
		evictions:   broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: EvictionComponentName}),
		taints: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodelifecycle-taints"}),
		probes: map[string]probe{},
		known:  map[string]types.UID{},
	}
	// New nodes are looked at by the next pass; a changed node's taints at once.
	_, err := nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur interface{}) {
			o, ok1 := old.(*corev1.Node)
			n, ok2 := cur.(*corev1.Node)
			if ok1 && ok2 && taintInputsChanged(o, n) {
				worker.Enqueue(c.taints, n)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Run waits for the caches, then looks at every node each NodeMonitorPeriod until ctx
// ends.
func (c *Controller) Run(ctx context.Context) error {
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()
	defer c.taints.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("nodelifecycle: caches did not sync: %w", ctx.Err())
	}
	worker.Start(ctx, 1, c.taints, c.syncNodeTaints, worker.Failed("nodelifecycle taints", "node", apierrors.IsConflict))
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.monitor(ctx); err != nil {
			// A lost write race is retried at the next pass; anything else is worth a warning.
			level := slog.LevelWarn
			if apierrors.IsConflict(err) {
				level = slog.LevelInfo
			}
			slog.Log(ctx, level, "nodelifecycle: monitor pass incomplete", "err", err)
		}
	}, c.cfg.NodeMonitorPeriod)
	return nil
}

// monitor is one pass over every node.
func (c *Controller) monitor(ctx context.Context) error {
	nodes, err := c.nodeLister.List(labels.Everything())
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	var errs []error
	for _, n := range nodes {
		seen[n.Name] = true
		if err := c.monitorNode(ctx, n); err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", n.Name, err))
		}
	}
	c.mu.Lock()
	for name := range c.probes {
		if !seen[name] {
			delete(c.probes, name)
		}
	}
	var removed []string
	for name, uid := range c.known {
		if !seen[name] {
			delete(c.known, name)
			removed = append(removed, name)
			c.recordNodeEvent(name, uid, "RemovingNode", fmt.Sprintf("Removing Node %v from Controller", name))
		}
	}
	c.mu.Unlock()
	for _, name := range removed {
		slog.InfoContext(ctx, "nodelifecycle: node removed", "node", name)
	}
	return errors.Join(errs...)
}

// nodeRef is the reference the controller's Node events are about.
func nodeRef(name string, uid types.UID) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: name, UID: uid}
}

// recordNodeEvent records a Normal event about node name, in upstream's "Node <name>
// event: <what>" form.
func (c *Controller) recordNodeEvent(name string, uid types.UID, reason, what string) {
	c.recorder.Eventf(nodeRef(name, uid), corev1.EventTypeNormal, reason, "Node %s event: %s", name, what)
}

// syncNodeTaints brings the taints of node name in line with its Ready condition and
// cordon.
func (c *Controller) syncNodeTaints(ctx context.Context, name string) error {
	n, err := c.nodeLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = c.syncTaints(ctx, n, c.cfg.Now())
	return err
}

func readyCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// heartbeat is the latest sign of life of n: its Lease's renewTime or its Ready
// condition's heartbeat.
func (c *Controller) heartbeat(n *corev1.Node) time.Time {
	var hb time.Time
	if r := readyCondition(n); r != nil {
		hb = r.LastHeartbeatTime.Time
	}
	if l, err := c.leaseLister.Leases(LeaseNamespace).Get(n.Name); err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(hb) {
		hb = l.Spec.RenewTime.Time
	}
	return hb
}

func (c *Controller) monitorNode(ctx context.Context, n *corev1.Node) error {
	now := c.cfg.Now()
	hb := c.heartbeat(n)
	c.mu.Lock()
	p, ok := c.probes[n.Name]
	if !ok || !hb.Equal(p.heartbeat) {
		p = probe{heartbeat: hb, seenAt: now}
		c.probes[n.Name] = p
	}
	if uid, known := c.known[n.Name]; !known || uid != n.UID {
		c.known[n.Name] = n.UID
		c.recordNodeEvent(n.Name, n.UID, "RegisteredNode", fmt.Sprintf("Registered Node %v in Controller", n.Name))
	}
	c.mu.Unlock()
	var errs []error
	if now.Sub(p.seenAt) > c.cfg.NodeMonitorGracePeriod {
		if r := readyCondition(n); r == nil || r.Status != corev1.ConditionUnknown {
			updated, err := c.markUnknown(ctx, n, now)
			if err != nil {
				return err
			}
			n = updated
		}
	}
	updated, err := c.syncTaints(ctx, n, now)
	if err != nil {
		errs = append(errs, err)
	} else {
		n = updated
	}
	errs = append(errs, c.evict(ctx, n, now))
	return errors.Join(errs...)
}

// markUnknown sets the node's conditions to Unknown and its pods not Ready.
func (c *Controller) markUnknown(ctx context.Context, n *corev1.Node, now time.Time) (*corev1.Node, error) {
	wasReady := false
	if r := readyCondition(n); r != nil && r.Status == corev1.ConditionTrue {
		wasReady = true
	}
	n = n.DeepCopy()
	ts := metav1.NewTime(now)
	reason, msg := "NodeStatusUnknown", "Kubelet stopped posting node status."
	if readyCondition(n) == nil {
		reason, msg = "NodeStatusNeverUpdated", "Kubelet never posted node status."
	}
	for _, t := range []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		found := false
		for i := range n.Status.Conditions {
			cond := &n.Status.Conditions[i]
			if cond.Type != t {
				continue
			}
			found = true
			if cond.Status != corev1.ConditionUnknown {
				cond.Status, cond.Reason, cond.Message, cond.LastTransitionTime = corev1.ConditionUnknown, reason, msg, ts
			}
		}
		if !found {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: t, Status: corev1.ConditionUnknown,
				Reason: reason, Message: msg, LastHeartbeatTime: ts, LastTransitionTime: ts})
		}
	}
	out, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("mark node %s unknown: %w", n.Name, err)
	}
	slog.InfoContext(ctx, "nodelifecycle: node stopped posting status", "node", n.Name)
	if wasReady {
		// Once, when the node turns from Ready; a node that was not Ready already
		// reported so itself.
		c.recorder.Eventf(nodeRef(out.Name, out.UID), corev1.EventTypeNormal, "NodeNotReady", "Node %s status is now: NodeNotReady", out.Name)
	}
	var errs []error
	for _, p := range c.podsOn(n.Name) {
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type != corev1.PodReady || p.Status.Conditions[i].Status != corev1.ConditionTrue {
				continue
			}
			pod := p.DeepCopy()
			pod.Status.Conditions[i].Status, pod.Status.Conditions[i].LastTransitionTime = corev1.ConditionFalse, ts
			if _, err := c.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("mark pod %s/%s not ready: %w", pod.Namespace, pod.Name, err))
			}
		}
	}
	return out, errors.Join(errs...)
}

func (c *Controller) syncTaints(ctx context.Context, n *corev1.Node, now time.Time) (*corev1.Node, error) {
	taints, changed := reconcileTaints(n.Spec.Taints, wantedTaints(readyCondition(n), n.Spec.Unschedulable), now)
	if !changed {
		return n, nil
	}
	n = n.DeepCopy()
	n.Spec.Taints = taints
	out, err := c.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("taint node %s: %w", n.Name, err)
	}
	return out, nil
}

func (c *Controller) podsOn(node string) []*corev1.Pod {
	objs, err := c.podIndexer.ByIndex(byNode, node)
	if err != nil {
		return nil
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*corev1.Pod))
	}
	return out
}

// evict deletes the pods of n whose toleration window for its NoExecute taints is over.
func (c *Controller) evict(ctx context.Context, n *corev1.Node, now time.Time) error {
	hasNoExecute := false
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoExecute {
			hasNoExecute = true
		}
	}
	if !hasNoExecute {
		return nil
	}
	var errs []error
	for _, p := range c.podsOn(n.Name) {
		if p.DeletionTimestamp != nil {
			continue
		}
		at, evict := evictionTime(p, n.Spec.Taints, c.cfg.DefaultTolerationSeconds, now)
		if !evict || at.After(now) {
			continue
		}
		c.evictions.Eventf(p, corev1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod %s/%s", p.Namespace, p.Name)
		err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("evict pod %s/%s: %w", p.Namespace, p.Name, err))
			continue
		}
		slog.InfoContext(ctx, "nodelifecycle: pod evicted", "pod", p.Namespace+"/"+p.Name, "node", n.Name)
	}
	return errors.Join(errs...)
}
