package rootcacertpublisher

import (
	"context"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubelab/kubelab/internal/util/worker"
)

const (
	// ConfigMapName is the ConfigMap the controller keeps in every namespace.
	ConfigMapName = "kube-root-ca.crt"
	// DataKey is the key of the CA bundle in it.
	DataKey = "ca.crt"
	// DescriptionAnnotation and Description say what the ConfigMap is for.
	DescriptionAnnotation = "kubernetes.io/description"
	Description           = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. " +
		"No other usage is guaranteed across distributions of Kubernetes clusters."
)

// Config configures the controller.
type Config struct {
	// RootCA is the PEM CA bundle published (required).
	RootCA []byte
	// Workers is the number of namespaces synced at once (1 when zero).
	Workers int
	// InformerClient lists and watches the published ConfigMaps; the client New is
	// given when nil. The controller-manager passes its own client here, as its shared
	// informers use, so that the controller's identity needs only to create and update
	// ConfigMaps.
	InformerClient kubernetes.Interface
}

func (c *Config) validate() error {
	var errs []error
	if len(c.RootCA) == 0 {
		errs = append(errs, errors.New("the root CA bundle is required"))
	}
	if c.Workers < 0 {
		errs = append(errs, fmt.Errorf("workers %d < 0", c.Workers))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("root-ca-cert-publisher: %w", err)
	}
	return nil
}

// Controller publishes the root CA bundle in every namespace.
type Controller struct {
	cfg        Config
	client     kubernetes.Interface
	namespaces corelisters.NamespaceLister
	configMaps corelisters.ConfigMapLister
	synced     []cache.InformerSynced
	factory    informers.SharedInformerFactory
	queue      workqueue.TypedRateLimitingInterface[string]
}

// New registers the Namespace informer on factory and a ConfigMap informer of its own
// (only the kube-root-ca.crt ConfigMaps); Run starts the latter.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Workers == 0 {
		cfg.Workers = 1
	}
	// Watching every ConfigMap of the cluster for one name each is wasteful: the
	// controller's own factory watches only those named ConfigMapName.
	informerClient := cfg.InformerClient
	if informerClient == nil {
		informerClient = client
	}
	cmFactory := informers.NewSharedInformerFactoryWithOptions(informerClient, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", ConfigMapName).String()
	}))
	nsInf, cmInf := factory.Core().V1().Namespaces(), cmFactory.Core().V1().ConfigMaps()
	c := &Controller{
		cfg: cfg, client: client, namespaces: nsInf.Lister(), configMaps: cmInf.Lister(), factory: cmFactory,
		synced: []cache.InformerSynced{nsInf.Informer().HasSynced, cmInf.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "root_ca_cert_publisher"}),
	}
	if _, err := nsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueueNamespace(obj) },
		UpdateFunc: func(_, obj any) { c.enqueueNamespace(obj) },
	}); err != nil {
		return nil, err
	}
	if _, err := cmInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { c.enqueueConfigMap(obj) },
		DeleteFunc: c.enqueueConfigMap,
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Controller) enqueueNamespace(obj any) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		c.queue.Add(ns.Name)
	}
}

func (c *Controller) enqueueConfigMap(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == ConfigMapName {
		c.queue.Add(cm.Namespace)
	}
}

// Run starts the controller's ConfigMap informer, waits for the caches, then syncs
// namespaces until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("root-ca-cert-publisher: caches did not sync: %w", ctx.Err())
	}
	worker.Start(ctx, c.cfg.Workers, c.queue, c.sync, worker.Failed("root-ca-cert-publisher", "namespace", nil))
	<-ctx.Done()
	return nil
}

// sync brings the ConfigMap of namespace ns to what desired says.
func (c *Controller) sync(ctx context.Context, ns string) error {
	namespace, err := c.namespaces.Get(ns)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if namespace.DeletionTimestamp != nil || namespace.Status.Phase == corev1.NamespaceTerminating {
		return nil
	}
	cm, err := c.configMaps.ConfigMaps(ns).Get(ConfigMapName)
	if apierrors.IsNotFound(err) {
		cm = nil
	} else if err != nil {
		return err
	}
	want, changed := desired(cm, ns, c.cfg.RootCA)
	if !changed {
		return nil
	}
	cms := c.client.CoreV1().ConfigMaps(ns)
	if cm == nil {
		_, err = cms.Create(ctx, want, metav1.CreateOptions{})
		// A namespace that went or is going away gets no ConfigMap; one made meanwhile
		// is looked at when its event comes.
		if apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("create configmap %s/%s: %w", ns, ConfigMapName, err)
		}
		return nil
	}
	if _, err := cms.Update(ctx, want, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update configmap %s/%s: %w", ns, ConfigMapName, err)
	}
	return nil
}

// desired is the ConfigMap namespace ns should have given the one it has (nil: none),
// and whether that differs from it. The current one is not modified.
func desired(current *corev1.ConfigMap, ns string, rootCA []byte) (*corev1.ConfigMap, bool) {
	data := map[string]string{DataKey: string(rootCA)}
	if current == nil {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: ns, Annotations: map[string]string{DescriptionAnnotation: Description}},
			Data:       data,
		}, true
	}
	if maps.Equal(current.Data, data) && current.Annotations[DescriptionAnnotation] != "" {
		return current, false
	}
	want := current.DeepCopy()
	want.Data = data
	if want.Annotations == nil {
		want.Annotations = map[string]string{}
	}
	want.Annotations[DescriptionAnnotation] = Description
	return want, true
}
