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
	resources, discoveryErr := c.namespacedResources()
	if discoveryErr != nil && len(resources) == 0 {
		_, err := c.updateConditions(ctx, ns, deletionConditions(discoveryErr, contentLeft{}, nil))
		return errors.Join(discoveryErr, err)
	}
	left, deleteErr := emptyNamespace(ctx, name, resources, c.deleteContent)
	if ns, err = c.updateConditions(ctx, ns, deletionConditions(discoveryErr, left, deleteErr)); err != nil {
		return errors.Join(deleteErr, err)
	}
	if deleteErr != nil {
		return deleteErr
	}
	if left.total() > 0 {
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

// namespacedResources are the namespaced resources that can be listed and deleted; the
// error names the groups discovery failed for, if any.
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
	return out, err
}

// podsResource is the resource emptyNamespace deletes before any other.
var podsResource = corev1.Resource("pods")

// contentLeft is what a deletion pass leaves in a namespace: the objects still there, by
// resource, and those among them that wait on finalizers, by finalizer.
type contentLeft struct {
	objects    map[schema.GroupVersionResource]int
	finalizers map[string]int
}

func (l *contentLeft) add(gvr schema.GroupVersionResource, objects int, finalizers map[string]int) {
	if objects == 0 {
		return
	}
	if l.objects == nil {
		l.objects, l.finalizers = map[schema.GroupVersionResource]int{}, map[string]int{}
	}
	l.objects[gvr] += objects
	for f, n := range finalizers {
		l.finalizers[f] += n
	}
}

// total is the number of objects left.
func (l contentLeft) total() int {
	n := 0
	for _, c := range l.objects {
		n += c
	}
	return n
}

// contentDeleter deletes every object of gvr in namespace ns and says how many remain and,
// of those, how many wait on each finalizer.
type contentDeleter func(ctx context.Context, ns string, gvr schema.GroupVersionResource) (int, map[string]int, error)

// emptyNamespace deletes the objects of resources in namespace ns through del, pods
// first: while any pod remains (terminating, or held by a finalizer) nothing else is
// deleted in this pass, so no pod outlives what it uses (its ServiceAccount, Secrets,
// ConfigMaps, the NetworkPolicies that restrict it). It returns what remains; a failure
// to delete one resource does not stop the others (but a pods' failure stops the pass).
func emptyNamespace(ctx context.Context, ns string, resources []schema.GroupVersionResource, del contentDeleter) (contentLeft, error) {
	var left contentLeft
	rest := make([]schema.GroupVersionResource, 0, len(resources))
	for _, gvr := range resources {
		if gvr.GroupResource() != podsResource {
			rest = append(rest, gvr)
			continue
		}
		n, finalizers, err := del(ctx, ns, gvr)
		if err != nil {
			return left, err
		}
		left.add(gvr, n, finalizers)
		if n > 0 {
			return left, nil
		}
	}
	var errs []error
	for _, gvr := range rest {
		n, finalizers, err := del(ctx, ns, gvr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		left.add(gvr, n, finalizers)
	}
	return left, errors.Join(errs...)
}

// deleteContent deletes every object of gvr in namespace ns and says how many remain
// (objects with finalizers or a grace period stay until they are done) and how many of
// those wait on each finalizer.
func (c *Controller) deleteContent(ctx context.Context, ns string, gvr schema.GroupVersionResource) (int, map[string]int, error) {
	client := c.metadata.Resource(gvr).Namespace(ns)
	background := metav1.DeletePropagationBackground
	err := client.DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &background}, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err) {
		return 0, nil, fmt.Errorf("delete %s in %s: %w", gvr.Resource, ns, err)
	}
	list, err := client.List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("list %s in %s: %w", gvr.Resource, ns, err)
	}
	finalizers := map[string]int{}
	for _, item := range list.Items {
		if item.DeletionTimestamp == nil {
			if err := client.Delete(ctx, item.Name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil && !apierrors.IsNotFound(err) {
				return 0, nil, fmt.Errorf("delete %s %s/%s: %w", gvr.Resource, ns, item.Name, err)
			}
		}
		for _, f := range item.Finalizers {
			finalizers[f]++
		}
	}
	return len(list.Items), finalizers, nil
}
