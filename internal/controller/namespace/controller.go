package namespace

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubelab/kubelab/internal/util/worker"
)

// Config tunes the controller.
type Config struct {
	// Workers is the number of namespaces emptied at once (1 when zero).
	Workers int
	// Recheck is how soon a namespace that still has content is looked at again.
	Recheck time.Duration
}

func (c *Config) validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("namespace controller: workers %d < 0", c.Workers)
	}
	return nil
}

// Controller empties and removes deleted namespaces.
type Controller struct {
	cfg       Config
	client    kubernetes.Interface
	metadata  metadata.Interface
	discovery discovery.DiscoveryInterface
	factory   informers.SharedInformerFactory
	lister    corelisters.NamespaceLister
	synced    cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
}

// errContentRemains asks for another pass once the namespace's content is gone.
var errContentRemains = errors.New("namespace still has content")

// New builds the controller on client and its metadata client.
func New(cfg Config, client kubernetes.Interface, md metadata.Interface) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Workers == 0 {
		cfg.Workers = 1
	}
	if cfg.Recheck == 0 {
		cfg.Recheck = time.Second
	}
	factory := informers.NewSharedInformerFactory(client, 10*time.Minute)
	inf := factory.Core().V1().Namespaces()
	c := &Controller{
		cfg: cfg, client: client, metadata: md, discovery: client.Discovery(), factory: factory,
		lister: inf.Lister(), synced: inf.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "namespace"}),
	}
	enqueue := func(obj interface{}) {
		if ns, ok := obj.(*corev1.Namespace); ok && ns.DeletionTimestamp != nil {
			c.queue.Add(ns.Name)
		}
	}
	_, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj interface{}) { enqueue(obj) },
	})
	return c, err
}

// Run works until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return ctx.Err()
	}
	worker.Start(ctx, c.cfg.Workers, c.queue, c.syncOrRecheck, worker.Failed("namespace", "namespace", nil))
	<-ctx.Done()
	return nil
}

// syncOrRecheck is sync for the worker: a namespace that still has content is looked
// at again after Config.Recheck.
func (c *Controller) syncOrRecheck(ctx context.Context, name string) error {
	err := c.sync(ctx, name)
	if errors.Is(err, errContentRemains) {
		return worker.RequeueAfter(c.cfg.Recheck)
	}
	return err
}

// sync empties namespace name if it is being deleted, then finalizes and deletes it.
func (c *Controller) sync(ctx context.Context, name string) error {
	ns, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.DeletionTimestamp == nil {
		return nil
	}
	if finalized(ns) {
		return c.deleteNamespace(ctx, ns)
	}
	resources, err := c.namespacedResources()
	if err != nil {
		return err
	}
	remaining, err := emptyNamespace(ctx, name, resources, c.deleteContent)
	if err != nil {
		return err
	}
	if remaining > 0 {
		return errContentRemains
	}
	ns = ns.DeepCopy()
	var keep []corev1.FinalizerName
	for _, f := range ns.Spec.Finalizers {
		if f != corev1.FinalizerKubernetes {
			keep = append(keep, f)
		}
	}
	ns.Spec.Finalizers = keep
	ns, err = c.client.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("finalize namespace %s: %w", name, err)
	}
	return c.deleteNamespace(ctx, ns)
}

func finalized(ns *corev1.Namespace) bool {
	for _, f := range ns.Spec.Finalizers {
		if f == corev1.FinalizerKubernetes {
			return false
		}
	}
	return true
}

func (c *Controller) deleteNamespace(ctx context.Context, ns *corev1.Namespace) error {
	err := c.client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &ns.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete namespace %s: %w", ns.Name, err)
	}
	return nil
}

// namespacedResources are the namespaced resources that can be listed and deleted.
func (c *Controller) namespacedResources() ([]schema.GroupVersionResource, error) {
	lists, err := c.discovery.ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		return nil, fmt.Errorf("discover namespaced resources: %w", err)
	}
	var out []schema.GroupVersionResource
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			verbs := sets.New(r.Verbs...)
			if verbs.Has("list") && verbs.Has("delete") {
				out = append(out, gv.WithResource(r.Name))
			}
		}
	}
	return out, nil
}

// podsResource is the resource emptyNamespace deletes before any other.
var podsResource = corev1.Resource("pods")

// contentDeleter deletes every object of gvr in namespace ns and says how many remain.
type contentDeleter func(ctx context.Context, ns string, gvr schema.GroupVersionResource) (int, error)

// emptyNamespace deletes the objects of resources in namespace ns through del, pods
// first: while any pod remains (terminating, or held by a finalizer) nothing else is
// deleted in this pass, so no pod outlives what it uses (its ServiceAccount, Secrets,
// ConfigMaps, the NetworkPolicies that restrict it). It returns how many objects remain.
func emptyNamespace(ctx context.Context, ns string, resources []schema.GroupVersionResource, del contentDeleter) (int, error) {
	rest := make([]schema.GroupVersionResource, 0, len(resources))
	for _, gvr := range resources {
		if gvr.GroupResource() != podsResource {
			rest = append(rest, gvr)
			continue
		}
		n, err := del(ctx, ns, gvr)
		if err != nil {
			return 0, err
		}
		if n > 0 {
			return n, nil
		}
	}
	remaining := 0
	for _, gvr := range rest {
		n, err := del(ctx, ns, gvr)
		if err != nil {
			return 0, err
		}
		remaining += n
	}
	return remaining, nil
}

// deleteContent deletes every object of gvr in namespace ns and says how many remain
// (objects with finalizers or a grace period stay until they are done).
func (c *Controller) deleteContent(ctx context.Context, ns string, gvr schema.GroupVersionResource) (int, error) {
	client := c.metadata.Resource(gvr).Namespace(ns)
	background := metav1.DeletePropagationBackground
	err := client.DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &background}, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err) {
		return 0, fmt.Errorf("delete %s in %s: %w", gvr.Resource, ns, err)
	}
	list, err := client.List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("list %s in %s: %w", gvr.Resource, ns, err)
	}
	for _, item := range list.Items {
		if item.DeletionTimestamp == nil {
			if err := client.Delete(ctx, item.Name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil && !apierrors.IsNotFound(err) {
				return 0, fmt.Errorf("delete %s %s/%s: %w", gvr.Resource, ns, item.Name, err)
			}
		}
	}
	return len(list.Items), nil
}
