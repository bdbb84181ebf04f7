package nodeipam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
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

// ComponentName is the source of the controller's Events, as upstream.
const ComponentName = "cidrAllocator"

// Config says which range to hand out.
type Config struct {
	// ClusterCIDR is the pod network (10.244.0.0/16 when empty).
	ClusterCIDR string
	// NodeCIDRMaskSize is the size of each node's subnet (24 when zero).
	NodeCIDRMaskSize int
}

func (c *Config) validate() error {
	_, err := newCIDRSet(c.ClusterCIDR, c.NodeCIDRMaskSize)
	return err
}

// Controller allocates pod CIDRs to nodes.
type Controller struct {
	cfg         Config
	client      kubernetes.Interface
	lister      corelisters.NodeLister
	synced      cache.InformerSynced
	queue       workqueue.TypedRateLimitingInterface[string]
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	mu   sync.Mutex
	set  *cidrSet
	mine map[string]string // node → CIDR, as allocated or seen
}

// DefaultClusterCIDR is the pod network the node CIDRs come from unless Config says otherwise.
const DefaultClusterCIDR = "10.244.0.0/16"

// New registers the controller's Node informer and handlers on factory.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory) (*Controller, error) {
	if cfg.ClusterCIDR == "" {
		cfg.ClusterCIDR = DefaultClusterCIDR
	}
	if cfg.NodeCIDRMaskSize == 0 {
		cfg.NodeCIDRMaskSize = 24
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("nodeipam: %w", err)
	}
	set, _ := newCIDRSet(cfg.ClusterCIDR, cfg.NodeCIDRMaskSize)
	inf := factory.Core().V1().Nodes()
	broadcaster := record.NewBroadcaster()
	c := &Controller{
		cfg: cfg, client: client, lister: inf.Lister(), synced: inf.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodeipam"}),
		broadcaster: broadcaster,
		recorder:    broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: ComponentName}),
		set:         set, mine: map[string]string{},
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.queue.Add(obj.(*corev1.Node).Name) },
		UpdateFunc: func(_, obj interface{}) { c.queue.Add(obj.(*corev1.Node).Name) },
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				c.queue.Add(n.Name)
			}
		},
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Run takes note of the CIDRs nodes already have, then allocates until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return fmt.Errorf("nodeipam: caches did not sync: %w", ctx.Err())
	}
	nodes, err := c.lister.List(labels.Everything())
	if err != nil {
		return err
	}
	c.mu.Lock()
	for _, n := range nodes {
		if n.Spec.PodCIDR == "" {
			continue
		}
		if err := c.set.occupy(n.Spec.PodCIDR); err != nil {
			slog.WarnContext(ctx, "nodeipam: node has a pod CIDR outside the cluster range", "node", n.Name, "err", err)
			continue
		}
		c.mine[n.Name] = n.Spec.PodCIDR
	}
	c.mu.Unlock()
	worker.Start(ctx, 1, c.queue, c.sync, worker.Failed("nodeipam", "node", nil))
	<-ctx.Done()
	return nil
}

// sync gives node name a pod CIDR if it has none, or frees the CIDR of a deleted node.
func (c *Controller) sync(ctx context.Context, name string) error {
	node, err := c.lister.Get(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if apierrors.IsNotFound(err) {
		if cidr, ok := c.mine[name]; ok {
			delete(c.mine, name)
			if err := c.set.release(cidr); err != nil {
				return err
			}
			// Nodes waiting for a CIDR may have one now.
			if nodes, err := c.lister.List(labels.Everything()); err == nil {
				for _, n := range nodes {
					if n.Spec.PodCIDR == "" {
						c.queue.Add(n.Name)
					}
				}
			}
		}
		return nil
	}
	if err != nil {
		return err
	}
	if node.Spec.PodCIDR != "" {
		if c.mine[name] != node.Spec.PodCIDR {
			if old, ok := c.mine[name]; ok {
				_ = c.set.release(old)
			}
			if err := c.set.occupy(node.Spec.PodCIDR); err == nil {
				c.mine[name] = node.Spec.PodCIDR
			}
		}
		return nil
	}
	cidr, ok := c.mine[name]
	if !ok {
		p, err := c.set.allocate()
		if errors.Is(err, errFull) {
			c.recorder.Eventf(node, corev1.EventTypeNormal, "CIDRNotAvailable", "Node %s status is now: CIDRNotAvailable", name)
			return fmt.Errorf("allocate pod CIDR for node %s: %w", name, err)
		}
		if err != nil {
			return err
		}
		cidr = p.String()
		c.mine[name] = cidr
	}
	patch, _ := json.Marshal(map[string]interface{}{
		"metadata": map[string]interface{}{"uid": node.UID},
		"spec":     map[string]interface{}{"podCIDR": cidr, "podCIDRs": []string{cidr}},
	})
	_, err = c.client.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			delete(c.mine, name)
			_ = c.set.release(cidr)
			return nil
		}
		c.recorder.Eventf(node, corev1.EventTypeWarning, "CIDRAssignmentFailed", "Node %s status is now: CIDRAssignmentFailed", name)
		return fmt.Errorf("set pod CIDR %s on node %s: %w", cidr, name, err)
	}
	slog.InfoContext(ctx, "nodeipam: pod CIDR allocated", "node", name, "podCIDR", cidr)
	return nil
}
