package cloudnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubelab/kubelab/internal/cloudprovider"
	"github.com/kubelab/kubelab/internal/util/worker"
)

// Component is the controller's name, as upstream.
const Component = "cloud-node-controller"

// Config tunes the controller.
type Config struct {
	// Workers is how many nodes are initialized at once (1 when zero).
	Workers int
	// NodeStatusUpdateFrequency is how often every node's addresses are refreshed from
	// the cloud (5 minutes when zero, as upstream's --node-status-update-frequency).
	NodeStatusUpdateFrequency time.Duration
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

// Controller initializes Nodes from the cloud.
type Controller struct {
	cfg    Config
	client kubernetes.Interface
	cloud  cloudprovider.Instances
	nodes  corelisters.NodeLister
	synced cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
}

// New registers the controller's node informer on factory; the caller starts it.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory, cloud cloudprovider.Instances) (*Controller, error) {
	if cloud == nil {
		return nil, errors.New("cloud-node controller: no cloud")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	if cfg.NodeStatusUpdateFrequency <= 0 {
		cfg.NodeStatusUpdateFrequency = 5 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	inf := factory.Core().V1().Nodes()
	c := &Controller{cfg: cfg, client: client, cloud: cloud, nodes: inf.Lister(), synced: inf.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "cloud_nodes"})}
	enqueue := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok && uninitialized(n) {
			worker.Enqueue(c.queue, n)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return nil, fmt.Errorf("cloud-node controller: %w", err)
	}
	return c, nil
}

// Run initializes nodes and refreshes their addresses until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return fmt.Errorf("cloud-node controller: caches did not sync: %w", ctx.Err())
	}
	worker.Start(ctx, c.cfg.Workers, c.queue, c.sync, worker.Failed("cloud-node", "node", apierrors.IsConflict))
	t := time.NewTicker(c.cfg.NodeStatusUpdateFrequency)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			c.refreshAddresses(ctx)
		}
	}
}

// sync initializes node key if it still carries the uninitialized taint.
func (c *Controller) sync(ctx context.Context, key string) error {
	node, err := c.nodes.Get(key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || !uninitialized(node) {
		return err
	}
	m, err := c.cloud.InstanceMetadata(ctx, node)
	if err != nil {
		return fmt.Errorf("node %s: %w", key, err)
	}
	addrs, err := addresses(node, m)
	if err != nil {
		return err
	}
	// The addresses first: once the taint is gone, pods come, and their clients need
	// the node's address.
	if err := c.updateAddresses(ctx, key, addrs); err != nil {
		return err
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.client.CoreV1().Nodes().Get(ctx, key, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !uninitialized(cur) {
			return nil
		}
		_, err = c.client.CoreV1().Nodes().Update(ctx, initialized(cur, m), metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("initialize node %s: %w", key, err)
	}
	c.cfg.Logger.InfoContext(ctx, "node initialized from the cloud", "node", key, "providerID", m.ProviderID, "instanceType", m.InstanceType, "zone", m.Zone)
	return nil
}

// updateAddresses writes node's status.addresses unless they are already addrs.
func (c *Controller) updateAddresses(ctx context.Context, name string, addrs []corev1.NodeAddress) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if apiequality.Semantic.DeepEqual(cur.Status.Addresses, addrs) {
			return nil
		}
		cur.Status.Addresses = addrs
		_, err = c.client.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("node %s: update addresses: %w", name, err)
	}
	return nil
}

// refreshAddresses brings every initialized node's addresses up to date.
func (c *Controller) refreshAddresses(ctx context.Context) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	for _, n := range nodes {
		if uninitialized(n) {
			continue
		}
		m, err := c.cloud.InstanceMetadata(ctx, n)
		if err == nil {
			var addrs []corev1.NodeAddress
			if addrs, err = addresses(n, m); err == nil {
				err = c.updateAddresses(ctx, n.Name, addrs)
			}
		}
		if err != nil && !errors.Is(err, cloudprovider.ErrInstanceNotFound) {
			c.cfg.Logger.WarnContext(ctx, "refresh node addresses", "node", n.Name, "err", err)
		}
	}
}
