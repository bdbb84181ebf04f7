package cloudnodelifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"

	"github.com/kubelab/kubelab/internal/cloudprovider"
)

// Component is the controller's name, as upstream.
const Component = "cloud-node-lifecycle-controller"

// Config tunes the controller.
type Config struct {
	// NodeMonitorPeriod is how often every node is looked at (5 s when zero).
	NodeMonitorPeriod time.Duration
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

// Controller deletes the Nodes of gone instances and taints those of stopped ones.
type Controller struct {
	cfg         Config
	client      kubernetes.Interface
	cloud       cloudprovider.Instances
	nodes       corelisters.NodeLister
	synced      cache.InformerSynced
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
}

// New registers the controller's node informer on factory; the caller starts it.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory, cloud cloudprovider.Instances) (*Controller, error) {
	if cloud == nil {
		return nil, errors.New("cloud-node-lifecycle controller: no cloud")
	}
	if cfg.NodeMonitorPeriod <= 0 {
		cfg.NodeMonitorPeriod = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	inf := factory.Core().V1().Nodes()
	b := record.NewBroadcaster()
	return &Controller{cfg: cfg, client: client, cloud: cloud, nodes: inf.Lister(), synced: inf.Informer().HasSynced,
		broadcaster: b, recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: Component})}, nil
}

// Run looks at every node each NodeMonitorPeriod until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return fmt.Errorf("cloud-node-lifecycle controller: caches did not sync: %w", ctx.Err())
	}
	t := time.NewTicker(c.cfg.NodeMonitorPeriod)
	defer t.Stop()
	for {
		c.monitor(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// monitor looks at every node once.
func (c *Controller) monitor(ctx context.Context) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	for _, n := range nodes {
		if err := c.syncNode(ctx, n); err != nil && ctx.Err() == nil {
			c.cfg.Logger.WarnContext(ctx, "cloud node lifecycle", "node", n.Name, "err", err)
		}
	}
}

func (c *Controller) syncNode(ctx context.Context, n *corev1.Node) error {
	exists, shutdown := true, false
	if !ready(n) {
		var err error
		if exists, err = c.cloud.InstanceExists(ctx, n); err != nil {
			return err
		}
		if exists {
			if shutdown, err = c.cloud.InstanceShutdown(ctx, n); err != nil && !errors.Is(err, cloudprovider.ErrInstanceNotFound) {
				return err
			}
		}
	}
	switch decide(n, exists, shutdown) {
	case deleteNode:
		c.cfg.Logger.InfoContext(ctx, "deleting node: its instance is gone from the cloud", "node", n.Name)
		c.recorder.Eventf(&corev1.ObjectReference{Kind: "Node", Name: n.Name, UID: n.UID, Namespace: ""}, corev1.EventTypeNormal,
			"DeletingNode", "Deleting node %s because it does not exist in the cloud provider", n.Name)
		err := c.client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &n.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete node: %w", err)
		}
	case addShutdownTaint:
		return c.setShutdownTaint(ctx, n.Name, true)
	case removeShutdownTaint:
		return c.setShutdownTaint(ctx, n.Name, false)
	}
	return nil
}

func (c *Controller) setShutdownTaint(ctx context.Context, name string, on bool) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if hasShutdownTaint(cur) == on {
			return nil
		}
		cur.Spec.Taints = withShutdownTaint(cur.Spec.Taints, on)
		_, err = c.client.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("shutdown taint: %w", err)
	}
	return nil
}
