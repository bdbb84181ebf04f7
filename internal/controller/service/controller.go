package service

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubelab/kubelab/internal/cloudprovider"
	"github.com/kubelab/kubelab/internal/util/worker"
)

// Component is the controller's name, as upstream.
const Component = "service-controller"

// Config tunes the controller.
type Config struct {
	// ClusterName goes into the load balancers' tag kubernetes.io/cluster/<name>
	// ("kubernetes" when empty, as upstream's --cluster-name).
	ClusterName string
	// ResyncPeriod is how often every load balancer is ensured again even if nothing
	// changed (5 minutes when zero).
	ResyncPeriod time.Duration
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

// applied is what the controller last made a Service's load balancer: the fingerprint
// of its configuration (all but the targets) and of the whole.
type applied struct{ config, full string }

// Controller makes the load balancers of Services of type LoadBalancer.
type Controller struct {
	cfg         Config
	client      kubernetes.Interface
	cloud       cloudprovider.LoadBalancers
	services    corelisters.ServiceLister
	nodes       corelisters.NodeLister
	slices      discoverylisters.EndpointSliceLister
	synced      []cache.InformerSynced
	queue       workqueue.TypedRateLimitingInterface[string]
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	mu   sync.Mutex
	done map[string]applied
}

// New registers the controller's informers (Services, Nodes, EndpointSlices) on factory;
// the caller starts it.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory, cloud cloudprovider.LoadBalancers) (*Controller, error) {
	if cloud == nil {
		return nil, errors.New("service controller: no cloud")
	}
	if cfg.ClusterName == "" {
		cfg.ClusterName = "kubernetes"
	}
	if cfg.ResyncPeriod <= 0 {
		cfg.ResyncPeriod = 5 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	svcs, nodes, eps := factory.Core().V1().Services(), factory.Core().V1().Nodes(), factory.Discovery().V1().EndpointSlices()
	b := record.NewBroadcaster()
	c := &Controller{cfg: cfg, client: client, cloud: cloud, services: svcs.Lister(), nodes: nodes.Lister(), slices: eps.Lister(),
		synced: []cache.InformerSynced{svcs.Informer().HasSynced, nodes.Informer().HasSynced, eps.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 5*time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "service"}),
		broadcaster: b, recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: Component}), done: map[string]applied{}}
	onService := func(obj any) { worker.Enqueue(c.queue, obj) }
	if _, err := svcs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onService, UpdateFunc: func(_, obj any) { onService(obj) }, DeleteFunc: onService,
	}); err != nil {
		return nil, fmt.Errorf("service controller: %w", err)
	}
	// A node that comes, goes, or changes readiness or labels changes the targets of
	// every instance-target load balancer.
	onNode := func(old, cur any) {
		o, _ := old.(*corev1.Node)
		n, _ := cur.(*corev1.Node)
		if o != nil && n != nil && cloudprovider.EligibleNode(o) == cloudprovider.EligibleNode(n) && o.Spec.ProviderID == n.Spec.ProviderID {
			return
		}
		c.enqueueAll()
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { onNode(nil, obj) }, UpdateFunc: onNode, DeleteFunc: func(obj any) { onNode(nil, nil) },
	}); err != nil {
		return nil, fmt.Errorf("service controller: %w", err)
	}
	onSlice := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if s, ok := obj.(*discoveryv1.EndpointSlice); ok && s.Labels[discoveryv1.LabelServiceName] != "" {
			c.queue.Add(s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName])
		}
	}
	if _, err := eps.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onSlice, UpdateFunc: func(_, obj any) { onSlice(obj) }, DeleteFunc: onSlice,
	}); err != nil {
		return nil, fmt.Errorf("service controller: %w", err)
	}
	return c, nil
}

// enqueueAll queues every Service that has or is to have a load balancer.
func (c *Controller) enqueueAll() {
	svcs, err := c.services.List(labels.Everything())
	if err != nil {
		return
	}
	for _, s := range svcs {
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer || slices.Contains(s.Finalizers, Finalizer) {
			worker.Enqueue(c.queue, s)
		}
	}
}

// Run syncs load balancers until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("service controller: caches did not sync: %w", ctx.Err())
	}
	worker.Start(ctx, 1, c.queue, c.sync, worker.Failed("service", "service", apierrors.IsConflict))
	t := time.NewTicker(c.cfg.ResyncPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			c.mu.Lock()
			clear(c.done)
			c.mu.Unlock()
			c.enqueueAll()
		}
	}
}

func fingerprint(v any) string {
	b, _ := json.Marshal(v)
	h := sha256.Sum256(b)
	return string(h[:])
}

// fingerprints are those of lb's configuration and of lb with its targets.
func fingerprints(lb *cloudprovider.LoadBalancer) applied {
	full := fingerprint(lb)
	cp := *lb
	cp.Listeners = slices.Clone(lb.Listeners)
	for i := range cp.Listeners {
		if d := cp.Listeners[i].Default; d != nil {
			tg := *d
			tg.Targets = nil
			cp.Listeners[i].Default = &tg
		}
	}
	return applied{config: fingerprint(&cp), full: full}
}

// sync makes the load balancer of Service key what the Service asks, or deletes it.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	if !wantsLoadBalancer(svc) {
		return c.cleanup(ctx, svc)
	}
	if err := c.addFinalizer(ctx, svc); err != nil {
		return err
	}
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name})
	eps, err := c.slices.EndpointSlices(ns).List(sel)
	if err != nil {
		return err
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	want, err := desiredLoadBalancer(svc, nodes, eps, c.cfg.ClusterName)
	if err != nil {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "SyncLoadBalancerFailed", "Error syncing load balancer: failed to ensure load balancer: %v", err)
		return err
	}
	fp := fingerprints(want)
	c.mu.Lock()
	last, seen := c.done[key]
	c.mu.Unlock()
	if seen && last == fp && len(svc.Status.LoadBalancer.Ingress) > 0 {
		return nil
	}
	configChanged := !seen || last.config != fp.config
	if configChanged {
		c.recorder.Event(svc, corev1.EventTypeNormal, "EnsuringLoadBalancer", "Ensuring load balancer")
	}
	st, err := c.cloud.EnsureLoadBalancer(ctx, want)
	if err != nil {
		c.forget(key)
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "SyncLoadBalancerFailed", "Error syncing load balancer: failed to ensure load balancer: %v", err)
		return err
	}
	if err := c.setStatus(ctx, svc, ingressStatus(st)); err != nil {
		c.forget(key)
		return err
	}
	c.mu.Lock()
	c.done[key] = fp
	c.mu.Unlock()
	if configChanged {
		c.recorder.Event(svc, corev1.EventTypeNormal, "EnsuredLoadBalancer", "Ensured load balancer")
	} else {
		c.recorder.Event(svc, corev1.EventTypeNormal, "UpdatedLoadBalancer", "Updated load balancer with new hosts")
	}
	c.cfg.Logger.InfoContext(ctx, "load balancer ensured", "service", key, "loadBalancer", want.Name, "dnsName", st.DNSName, "address", st.Address)
	return nil
}

func (c *Controller) forget(key string) {
	c.mu.Lock()
	delete(c.done, key)
	c.mu.Unlock()
}

// cleanup deletes the load balancer of a Service that no longer wants one, clears its
// status and drops the finalizer.
func (c *Controller) cleanup(ctx context.Context, svc *corev1.Service) error {
	c.forget(svc.Namespace + "/" + svc.Name)
	if !slices.Contains(svc.Finalizers, Finalizer) {
		return nil // never ours (another class's, or not a LoadBalancer), or done
	}
	c.recorder.Event(svc, corev1.EventTypeNormal, "DeletingLoadBalancer", "Deleting load balancer")
	if err := c.cloud.DeleteLoadBalancer(ctx, LoadBalancerName(svc)); err != nil {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "SyncLoadBalancerFailed", "Error syncing load balancer: failed to delete load balancer: %v", err)
		return err
	}
	c.recorder.Event(svc, corev1.EventTypeNormal, "DeletedLoadBalancer", "Deleted load balancer")
	if len(svc.Status.LoadBalancer.Ingress) > 0 && svc.DeletionTimestamp == nil {
		if err := c.setStatus(ctx, svc, corev1.LoadBalancerStatus{}); err != nil {
			return err
		}
	}
	return c.removeFinalizer(ctx, svc)
}

// patch writes part (a JSON merge patch) to the Service, or to its status. The ClusterRole
// system:cloud-controller-manager may patch Services but not get them, as upstream's; a
// merge patch of the finalizers or of status.loadBalancer alone needs no fresh copy.
func (c *Controller) patch(ctx context.Context, svc *corev1.Service, part any, status bool) error {
	body, err := json.Marshal(part)
	if err != nil {
		return err
	}
	var sub []string
	if status {
		sub = []string{"status"}
	}
	_, err = c.client.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, body,
		metav1.PatchOptions{FieldManager: "cloud-controller-manager"}, sub...)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}

func finalizersPatch(fs []string) any {
	if fs == nil {
		fs = []string{}
	}
	return map[string]any{"metadata": map[string]any{"finalizers": fs}}
}

func (c *Controller) addFinalizer(ctx context.Context, svc *corev1.Service) error {
	if slices.Contains(svc.Finalizers, Finalizer) {
		return nil
	}
	return c.patch(ctx, svc, finalizersPatch(append(slices.Clone(svc.Finalizers), Finalizer)), false)
}

func (c *Controller) removeFinalizer(ctx context.Context, svc *corev1.Service) error {
	if !slices.Contains(svc.Finalizers, Finalizer) {
		return nil
	}
	return c.patch(ctx, svc, finalizersPatch(slices.DeleteFunc(slices.Clone(svc.Finalizers), func(f string) bool { return f == Finalizer })), false)
}

func (c *Controller) setStatus(ctx context.Context, svc *corev1.Service, st corev1.LoadBalancerStatus) error {
	if apiequality.Semantic.DeepEqual(svc.Status.LoadBalancer, st) {
		return nil
	}
	var lb any = st
	if len(st.Ingress) == 0 {
		lb = map[string]any{"ingress": nil}
	}
	return c.patch(ctx, svc, map[string]any{"status": map[string]any{"loadBalancer": lb}}, true)
}
