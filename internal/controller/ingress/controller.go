package ingress

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubelab/kubelab/internal/cloudprovider"
	"github.com/kubelab/kubelab/internal/util/worker"
)

// Component is the controller's name (the source of its Events), as the AWS Load
// Balancer Controller's.
const Component = "ingress"

// Config tunes the controller.
type Config struct {
	// ClusterName goes into the load balancers' tag kubernetes.io/cluster/<name>
	// ("kubernetes" when empty).
	ClusterName string
	// ResyncPeriod is how often every group is ensured again (5 minutes when zero).
	ResyncPeriod time.Duration
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

// Controller makes the application load balancers of Ingress groups.
type Controller struct {
	cfg         Config
	client      kubernetes.Interface
	cloud       cloudprovider.LoadBalancers
	ingresses   networkinglisters.IngressLister
	classes     networkinglisters.IngressClassLister
	services    corelisters.ServiceLister
	nodes       corelisters.NodeLister
	slices      discoverylisters.EndpointSliceLister
	synced      []cache.InformerSynced
	queue       workqueue.TypedRateLimitingInterface[string]
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	mu sync.Mutex
	// done is, by group, the fingerprint of the load balancer last ensured, so that the
	// changes of unrelated Services and EndpointSlices cost no ELB calls.
	done map[string]string
}

// New registers the controller's informers on factory; the caller starts it.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory, cloud cloudprovider.LoadBalancers) (*Controller, error) {
	if cloud == nil {
		return nil, errors.New("ingress controller: no cloud")
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
	ings, classes := factory.Networking().V1().Ingresses(), factory.Networking().V1().IngressClasses()
	svcs, nodes, eps := factory.Core().V1().Services(), factory.Core().V1().Nodes(), factory.Discovery().V1().EndpointSlices()
	b := record.NewBroadcaster()
	c := &Controller{cfg: cfg, client: client, cloud: cloud, ingresses: ings.Lister(), classes: classes.Lister(),
		services: svcs.Lister(), nodes: nodes.Lister(), slices: eps.Lister(),
		synced: []cache.InformerSynced{ings.Informer().HasSynced, classes.Informer().HasSynced, svcs.Informer().HasSynced,
			nodes.Informer().HasSynced, eps.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 5*time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "ingress"}),
		broadcaster: b, recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: Component}), done: map[string]string{}}
	onIngress := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if ing, ok := obj.(*networkingv1.Ingress); ok {
			c.queue.Add(GroupKey(ing))
		}
	}
	all := func(any) { c.enqueueAll() }
	for _, h := range []struct {
		inf     cache.SharedIndexInformer
		handler cache.ResourceEventHandler
	}{
		{ings.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: onIngress, DeleteFunc: onIngress,
			UpdateFunc: func(old, cur any) { onIngress(old); onIngress(cur) }}},
		{classes.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: all, DeleteFunc: all, UpdateFunc: func(_, o any) { all(o) }}},
		{svcs.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: all, DeleteFunc: all, UpdateFunc: func(_, o any) { all(o) }}},
		{nodes.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: all, DeleteFunc: all, UpdateFunc: func(old, cur any) {
			if o, n := old.(*corev1.Node), cur.(*corev1.Node); cloudprovider.EligibleNode(o) != cloudprovider.EligibleNode(n) {
				all(cur)
			}
		}}},
		{eps.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: all, DeleteFunc: all, UpdateFunc: func(_, o any) { all(o) }}},
	} {
		if _, err := h.inf.AddEventHandler(h.handler); err != nil {
			return nil, fmt.Errorf("ingress controller: %w", err)
		}
	}
	return c, nil
}

// enqueueAll queues the group of every Ingress of the class or holding the finalizer.
func (c *Controller) enqueueAll() {
	ings, err := c.ingresses.List(labels.Everything())
	if err != nil {
		return
	}
	classes := c.classMap()
	for _, ing := range ings {
		if ofClass(ing, classes) || slices.Contains(ing.Finalizers, Finalizer) {
			c.queue.Add(GroupKey(ing))
		}
	}
}

func (c *Controller) classMap() map[string]string {
	m := map[string]string{}
	list, _ := c.classes.List(labels.Everything())
	for _, ic := range list {
		m[ic.Name] = ic.Spec.Controller
	}
	return m
}

// Run syncs the groups' load balancers until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("ingress controller: caches did not sync: %w", ctx.Err())
	}
	worker.Start(ctx, 1, c.queue, c.sync, worker.Failed("ingress", "group", apierrors.IsConflict))
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

// members are the group's Ingresses that are to be served, sorted, and those that hold
// the finalizer but are leaving (deleted, or of another class).
func (c *Controller) members(group string) (serve, leaving []*networkingv1.Ingress, err error) {
	ings, err := c.ingresses.List(labels.Everything())
	if err != nil {
		return nil, nil, err
	}
	classes := c.classMap()
	for _, ing := range ings {
		switch {
		case GroupKey(ing) != group:
			// One that moved to another group is served there; this group's sync
			// takes its rules off this load balancer.
		case ofClass(ing, classes) && ing.DeletionTimestamp == nil:
			serve = append(serve, ing)
		case slices.Contains(ing.Finalizers, Finalizer):
			leaving = append(leaving, ing) // deleted, or no longer of the class
		}
	}
	order := func(a, b *networkingv1.Ingress) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	}
	slices.SortFunc(serve, order)
	return serve, leaving, nil
}

func (c *Controller) world() (World, error) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return World{}, err
	}
	return World{Nodes: nodes,
		Services: func(ns, name string) (*corev1.Service, error) { return c.services.Services(ns).Get(name) },
		Slices: func(ns, svc string) []*discoveryv1.EndpointSlice {
			l, _ := c.slices.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc}))
			return l
		}}, nil
}

// sync makes the load balancer of group serve its Ingresses, or deletes it when none is
// left, then lets the leaving Ingresses go.
func (c *Controller) sync(ctx context.Context, group string) error {
	serve, leaving, err := c.members(group)
	if err != nil {
		return err
	}
	if len(serve) == 0 {
		if len(leaving) > 0 {
			if err := c.cloud.DeleteLoadBalancer(ctx, LoadBalancerName(group)); err != nil {
				for _, ing := range leaving {
					c.recorder.Eventf(ing, corev1.EventTypeWarning, "FailedDeployModel", "Failed deploy model due to %v", err)
				}
				return err
			}
			c.cfg.Logger.InfoContext(ctx, "load balancer of ingress group deleted", "group", group, "loadBalancer", LoadBalancerName(group))
		}
		c.setDone(group, "")
		return c.release(ctx, leaving)
	}
	for _, ing := range serve {
		if err := c.updateIngress(ctx, ing, false, func(i *networkingv1.Ingress) bool {
			if slices.Contains(i.Finalizers, Finalizer) {
				return false
			}
			i.Finalizers = append(i.Finalizers, Finalizer)
			return true
		}); err != nil {
			return err
		}
	}
	w, err := c.world()
	if err != nil {
		return err
	}
	want, err := DesiredLoadBalancer(group, serve, w, c.cfg.ClusterName)
	if err != nil {
		for _, ing := range serve {
			c.recorder.Eventf(ing, corev1.EventTypeWarning, "FailedBuildModel", "Failed build model due to %v", err)
		}
		return err
	}
	fp := fingerprint(want, serve)
	c.mu.Lock()
	same := c.done[group] == fp
	c.mu.Unlock()
	if same {
		return nil
	}
	st, err := c.cloud.EnsureLoadBalancer(ctx, want)
	if err != nil {
		c.setDone(group, "")
		for _, ing := range serve {
			c.recorder.Eventf(ing, corev1.EventTypeWarning, "FailedDeployModel", "Failed deploy model due to %v", err)
		}
		return err
	}
	status := ingressStatus(st.DNSName)
	for _, ing := range serve {
		changed := !apiequality.Semantic.DeepEqual(ing.Status.LoadBalancer, status)
		if err := c.updateIngress(ctx, ing, true, func(i *networkingv1.Ingress) bool {
			if apiequality.Semantic.DeepEqual(i.Status.LoadBalancer, status) {
				return false
			}
			i.Status.LoadBalancer = status
			return true
		}); err != nil {
			return err
		}
		if changed {
			c.recorder.Event(ing, corev1.EventTypeNormal, "SuccessfullyReconciled", "Successfully reconciled")
		}
	}
	if err := c.release(ctx, leaving); err != nil {
		return err
	}
	c.setDone(group, fp)
	return nil
}

func (c *Controller) setDone(group, fp string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fp == "" {
		delete(c.done, group)
	} else {
		c.done[group] = fp
	}
}

// fingerprint identifies a desired load balancer and the Ingresses (at their versions)
// it serves: the same again needs no call to the cloud.
func fingerprint(lb *cloudprovider.LoadBalancer, ings []*networkingv1.Ingress) string {
	b, _ := json.Marshal(lb)
	h := sha256.New()
	h.Write(b)
	for _, ing := range ings {
		h.Write([]byte(string(ing.UID) + "@" + ing.ResourceVersion + ";"))
	}
	return string(h.Sum(nil))
}

// release clears the status of Ingresses no longer served and drops their finalizer.
func (c *Controller) release(ctx context.Context, leaving []*networkingv1.Ingress) error {
	for _, ing := range leaving {
		if err := c.updateIngress(ctx, ing, true, func(i *networkingv1.Ingress) bool {
			if i.DeletionTimestamp != nil || len(i.Status.LoadBalancer.Ingress) == 0 {
				return false
			}
			i.Status.LoadBalancer = networkingv1.IngressLoadBalancerStatus{}
			return true
		}); err != nil {
			return err
		}
		if err := c.updateIngress(ctx, ing, false, func(i *networkingv1.Ingress) bool {
			if !slices.Contains(i.Finalizers, Finalizer) {
				return false
			}
			i.Finalizers = slices.DeleteFunc(i.Finalizers, func(f string) bool { return f == Finalizer })
			return true
		}); err != nil {
			return err
		}
	}
	return nil
}

// updateIngress applies change to the current Ingress and updates it (or its status)
// unless change answers false.
func (c *Controller) updateIngress(ctx context.Context, ing *networkingv1.Ingress, status bool, change func(*networkingv1.Ingress) bool) error {
	api := c.client.NetworkingV1().Ingresses(ing.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := api.Get(ctx, ing.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != ing.UID || !change(cur) {
			return nil
		}
		opts := metav1.UpdateOptions{FieldManager: "cloud-controller-manager"}
		if status {
			_, err = api.UpdateStatus(ctx, cur, opts)
		} else {
			_, err = api.Update(ctx, cur, opts)
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ingress %s/%s: %w", ing.Namespace, ing.Name, err)
	}
	return nil
}
