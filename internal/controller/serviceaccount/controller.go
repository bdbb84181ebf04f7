package serviceaccount

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubelab/kubelab/internal/util/worker"
)

// Config tunes the controller.
type Config struct {
	// ServiceAccounts to keep in every namespace (["default"] when empty).
	ServiceAccounts []string
	// Workers is the number of namespaces synced at once (1 when zero).
	Workers int
}

func (c *Config) validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("serviceaccount controller: workers %d < 0", c.Workers)
	}
	for _, n := range c.ServiceAccounts {
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			return fmt.Errorf("serviceaccount controller: service account name %q: %v", n, errs)
		}
	}
	return nil
}

// Controller keeps the default ServiceAccounts.
type Controller struct {
	cfg      Config
	client   kubernetes.Interface
	nsLister corelisters.NamespaceLister
	saLister corelisters.ServiceAccountLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
}

// New registers the controller's informers and handlers on factory.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if len(cfg.ServiceAccounts) == 0 {
		cfg.ServiceAccounts = []string{"default"}
	}
	if cfg.Workers == 0 {
		cfg.Workers = 1
	}
	nsInf := factory.Core().V1().Namespaces()
	saInf := factory.Core().V1().ServiceAccounts()
	c := &Controller{
		cfg: cfg, client: client, nsLister: nsInf.Lister(), saLister: saInf.Lister(),
		synced: []cache.InformerSynced{nsInf.Informer().HasSynced, saInf.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "serviceaccount"}),
	}
	if _, err := nsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.queue.Add(obj.(*corev1.Namespace).Name) },
		UpdateFunc: func(_, obj interface{}) { c.queue.Add(obj.(*corev1.Namespace).Name) },
	}); err != nil {
		return nil, err
	}
	if _, err := saInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if sa, ok := obj.(*corev1.ServiceAccount); ok && c.managed(sa.Name) {
				c.queue.Add(sa.Namespace)
			}
		},
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Controller) managed(name string) bool {
	for _, n := range c.cfg.ServiceAccounts {
		if n == name {
			return true
		}
	}
	return false
}

// Run waits for the caches, then syncs namespaces until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("serviceaccount controller: caches did not sync: %w", ctx.Err())
	}
	worker.Start(ctx, c.cfg.Workers, c.queue, c.sync, worker.Failed("serviceaccount", "namespace", nil))
	<-ctx.Done()
	return nil
}

// sync creates the missing service accounts of namespace ns.
func (c *Controller) sync(ctx context.Context, ns string) error {
	namespace, err := c.nsLister.Get(ns)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if namespace.Status.Phase != corev1.NamespaceActive && namespace.Status.Phase != "" || namespace.DeletionTimestamp != nil {
		return nil
	}
	var errs []error
	for _, name := range missing(c.cfg.ServiceAccounts, func(name string) bool {
		_, err := c.saLister.ServiceAccounts(ns).Get(name)
		return err == nil
	}) {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		_, err := c.client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			errs = append(errs, fmt.Errorf("create service account %s/%s: %w", ns, name, err))
		}
	}
	return errors.Join(errs...)
}

// missing returns the names for which exists says no.
func missing(names []string, exists func(string) bool) []string {
	var out []string
	for _, n := range names {
		if !exists(n) {
			out = append(out, n)
		}
	}
	return out
}
