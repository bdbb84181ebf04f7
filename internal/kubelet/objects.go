package kubelet

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// rootCAConfigMap is the ConfigMap every namespace holds with the cluster's CA bundle
// (key ca.crt); service-account volumes project it.
const rootCAConfigMap = "kube-root-ca.crt"

// ObjectsConfig configures the kubelet's source of ConfigMaps, Secrets and Services.
type ObjectsConfig struct {
	// RootCA is the cluster's CA bundle (PEM). A namespace without a kube-root-ca.crt
	// ConfigMap (the root-ca-cert-publisher controller has not published it yet) is
	// served one holding it as ca.crt; empty leaves such ConfigMaps missing like any
	// other.
	RootCA []byte
	// SyncTimeout is how long a lookup waits for a watch it starts (of a namespace's
	// Services, of a ConfigMap or Secret) to fill its cache before it asks the API server
	// directly (5 s).
	SyncTimeout time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// ObjectRef names a ConfigMap or Secret that was added or changed.
type ObjectRef struct {
	// Kind is "ConfigMap" or "Secret".
	Kind, Namespace, Name string
}

// Objects gives the kubelet the ConfigMaps, Secrets and Services its pods reference: the
// contents of configMap, secret and projected volumes, and containers' env (it implements
// the container runtime's object lookups). It watches, through client-go informers, the
// Services of each namespace it was asked about (and of the default namespace, for the
// "kubernetes" Service) and each ConfigMap and Secret it was asked about, by name (a field
// selector on metadata.name: the Node authorizer lets a kubelet list and watch only the
// ConfigMaps and Secrets its pods use, one by one), starting each watch at its first
// lookup; Retain stops those of namespaces the node no longer runs pods in. Handlers
// registered with OnChange hear of every watched ConfigMap and Secret added or updated.
// Lookups that miss the cache ask the API server (an object created
// just before the pod may not have reached the cache yet), so a NotFound is the API
// server's answer; its message names the kind in the singular (configmap "x" not found),
// as the kubelet reports it in FailedMount events. Returned objects are shared: read only.
type Objects struct {
	cfg    ObjectsConfig
	client kubernetes.Interface
	log    *slog.Logger

	mu       sync.Mutex
	ctx      context.Context // Run's; nil before Run: lookups go to the API server
	caches   map[string]*nsCache
	handlers []func(ObjectRef)
	warned   sets.Set[string]
}

// nsCache holds the watches of one namespace: its Services, and the ConfigMaps and
// Secrets asked for, each on its own.
type nsCache struct {
	factory   informers.SharedInformerFactory // the Services'
	stop      chan struct{}
	services  corelisters.ServiceNamespaceLister
	hasSynced []cache.InformerSynced
	synced    atomic.Bool

	mu      sync.Mutex
	objects map[ObjectRef]*objectWatch
}

// objectWatch is the watch of one ConfigMap or Secret.
type objectWatch struct {
	factory   informers.SharedInformerFactory
	stop      chan struct{}
	store     cache.Store
	hasSynced []cache.InformerSynced
	synced    atomic.Bool
}

// NewObjects returns the object source of a kubelet talking to the API server through
// client. Run starts it.
func NewObjects(cfg ObjectsConfig, client kubernetes.Interface) (*Objects, error) {
	if client == nil {
		return nil, fmt.Errorf("kubelet objects: a client is required")
	}
	if cfg.SyncTimeout < 0 {
		return nil, fmt.Errorf("kubelet objects: sync timeout %v must not be negative", cfg.SyncTimeout)
	}
	if cfg.SyncTimeout == 0 {
		cfg.SyncTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Objects{cfg: cfg, client: client, log: cfg.Logger, caches: map[string]*nsCache{}, warned: sets.New[string]()}, nil
}

// OnChange registers h, called (from informer goroutines) for every watched ConfigMap and
// Secret added or updated.
func (o *Objects) OnChange(h func(ObjectRef)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.handlers = append(o.handlers, h)
}

// Run serves lookups from watches until ctx ends, then stops every watch.
func (o *Objects) Run(ctx context.Context) error {
	o.mu.Lock()
	o.ctx = ctx
	o.mu.Unlock()
	<-ctx.Done()
	o.mu.Lock()
	caches := o.caches
	o.caches = map[string]*nsCache{}
	o.mu.Unlock()
	for _, c := range caches {
		c.shutdown()
	}
	return nil
}

// Retain stops watching the namespaces keep says no pod of the node is in (the default
// namespace is always watched once it was asked about).
func (o *Objects) Retain(keep func(namespace string) bool) {
	o.mu.Lock()
	var gone []*nsCache
	for ns, c := range o.caches {
		if ns != metav1.NamespaceDefault && !keep(ns) {
			gone = append(gone, c)
			delete(o.caches, ns)
		}
	}
	o.mu.Unlock()
	for _, c := range gone {
		c.shutdown()
	}
}

// Watched lists the namespaces whose objects are watched.
func (o *Objects) Watched() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return sets.List(sets.KeySet(o.caches))
}

func (c *nsCache) shutdown() {
	close(c.stop)
	c.factory.Shutdown()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.objects {
		w.shutdown()
	}
}

func (w *objectWatch) shutdown() {
	close(w.stop)
	w.factory.Shutdown()
}

// cache is namespace ns's filled cache, started when needed; nil before Run, after it,
// or when the cache did not fill within SyncTimeout.
func (o *Objects) cache(ns string) *nsCache {
	o.mu.Lock()
	if o.ctx == nil || o.ctx.Err() != nil {
		o.mu.Unlock()
		return nil
	}
	c := o.caches[ns]
	if c == nil {
		c = o.startCache(ns)
		o.caches[ns] = c
	}
	ctx := o.ctx
	o.mu.Unlock()
	if !o.waitSynced(ctx, &c.synced, c.hasSynced) {
		return nil
	}
	return c
}

// waitSynced waits up to SyncTimeout for hasSynced, remembered in synced.
func (o *Objects) waitSynced(ctx context.Context, synced *atomic.Bool, hasSynced []cache.InformerSynced) bool {
	if synced.Load() {
		return true
	}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, o.cfg.SyncTimeout, true, func(context.Context) (bool, error) {
		for _, s := range hasSynced {
			if !s() {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return false
	}
	synced.Store(true)
	return true
}

// watched is the filled cache of the ConfigMap or Secret ref, its watch started when
// needed (with its namespace's); nil before Run, after it, or when it did not fill
// within SyncTimeout.
func (o *Objects) watched(ref ObjectRef) cache.Store {
	o.mu.Lock()
	if o.ctx == nil || o.ctx.Err() != nil {
		o.mu.Unlock()
		return nil
	}
	c := o.caches[ref.Namespace]
	if c == nil {
		c = o.startCache(ref.Namespace)
		o.caches[ref.Namespace] = c
	}
	ctx := o.ctx
	o.mu.Unlock()
	c.mu.Lock()
	w := c.objects[ref]
	if w == nil {
		w = o.startWatch(c, ref)
		c.objects[ref] = w
	}
	c.mu.Unlock()
	if !o.waitSynced(ctx, &w.synced, w.hasSynced) {
		return nil
	}
	return w.store
}

// startWatch starts the informer of the one ConfigMap or Secret ref; c.mu is held.
func (o *Objects) startWatch(c *nsCache, ref ObjectRef) *objectWatch {
	f := informers.NewSharedInformerFactoryWithOptions(o.client, 0, informers.WithNamespace(ref.Namespace),
		informers.WithTweakListOptions(func(opts *metav1.ListOptions) {
			opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", ref.Name).String()
		}))
	var inf cache.SharedIndexInformer
	if ref.Kind == "ConfigMap" {
		inf = f.Core().V1().ConfigMaps().Informer()
	} else {
		inf = f.Core().V1().Secrets().Informer()
	}
	_, _ = inf.AddEventHandler(o.notify(ref.Kind))
	w := &objectWatch{factory: f, stop: make(chan struct{}), store: inf.GetStore(), hasSynced: []cache.InformerSynced{inf.HasSynced}}
	f.Start(w.stop)
	return w
}

// unwatch stops the watch of ref, which the node may not read (no pod of its uses it).
func (o *Objects) unwatch(ref ObjectRef) {
	o.mu.Lock()
	c := o.caches[ref.Namespace]
	o.mu.Unlock()
	if c == nil {
		return
	}
	c.mu.Lock()
	w := c.objects[ref]
	delete(c.objects, ref)
	c.mu.Unlock()
	if w != nil {
		w.shutdown()
	}
}

// notify tells the OnChange handlers of the objects of kind an informer adds or updates.
func (o *Objects) notify(kind string) cache.ResourceEventHandler {
	h := func(obj any) {
		m, err := metaOf(obj)
		if err != nil {
			return
		}
		o.mu.Lock()
		hs := append([]func(ObjectRef){}, o.handlers...)
		o.mu.Unlock()
		for _, h := range hs {
			h(ObjectRef{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()})
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: h, UpdateFunc: func(_, obj any) { h(obj) }}
}

// startCache starts the Services informer of namespace ns; o.mu is held.
func (o *Objects) startCache(ns string) *nsCache {
	f := informers.NewSharedInformerFactoryWithOptions(o.client, 0, informers.WithNamespace(ns))
	services := f.Core().V1().Services()
	c := &nsCache{factory: f, stop: make(chan struct{}), services: services.Lister().Services(ns),
		hasSynced: []cache.InformerSynced{services.Informer().HasSynced}, objects: map[ObjectRef]*objectWatch{}}
	f.Start(c.stop)
	return c
}

func metaOf(obj any) (metav1.Object, error) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("not an object: %T", obj)
	}
	return m, nil
}

// lookupContext bounds a direct request to the API server.
func (o *Objects) lookupContext() (context.Context, context.CancelFunc) {
	o.mu.Lock()
	ctx := o.ctx
	o.mu.Unlock()
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithTimeout(ctx, 10*time.Second)
}

// ConfigMap returns the ConfigMap namespace/name; a missing one is a NotFound error
// (configmap "name" not found).
func (o *Objects) ConfigMap(namespace, name string) (*corev1.ConfigMap, error) {
	cm, err := o.configMap(namespace, name)
	if apierrors.IsNotFound(err) && name == rootCAConfigMap && len(o.cfg.RootCA) > 0 {
		o.warnOnce("root-ca/"+namespace, "no kube-root-ca.crt ConfigMap in the namespace: serving the cluster CA as its ca.crt", "namespace", namespace)
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Data: map[string]string{"ca.crt": string(o.cfg.RootCA)}}, nil
	}
	return cm, err
}

func (o *Objects) configMap(namespace, name string) (*corev1.ConfigMap, error) {
	if store := o.watched(ObjectRef{Kind: "ConfigMap", Namespace: namespace, Name: name}); store != nil {
		if obj, ok, err := store.GetByKey(namespace + "/" + name); err == nil && ok {
			return obj.(*corev1.ConfigMap), nil
		}
	}
	ctx, cancel := o.lookupContext()
	defer cancel()
	cm, err := o.client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmap"}, name)
	}
	if apierrors.IsForbidden(err) {
		o.unwatch(ObjectRef{Kind: "ConfigMap", Namespace: namespace, Name: name})
	}
	if err != nil {
		return nil, fmt.Errorf("get configmap %s/%s: %w", namespace, name, err)
	}
	return cm, nil
}

// Secret returns the Secret namespace/name; a missing one is a NotFound error (secret
// "name" not found).
func (o *Objects) Secret(namespace, name string) (*corev1.Secret, error) {
	if store := o.watched(ObjectRef{Kind: "Secret", Namespace: namespace, Name: name}); store != nil {
		if obj, ok, err := store.GetByKey(namespace + "/" + name); err == nil && ok {
			return obj.(*corev1.Secret), nil
		}
	}
	ctx, cancel := o.lookupContext()
	defer cancel()
	s, err := o.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secret"}, name)
	}
	if apierrors.IsForbidden(err) {
		o.unwatch(ObjectRef{Kind: "Secret", Namespace: namespace, Name: name})
	}
	if err != nil {
		return nil, fmt.Errorf("get secret %s/%s: %w", namespace, name, err)
	}
	return s, nil
}

// ServiceEnv returns the Service variables of the pod's containers: those of the
// "kubernetes" Service of the default namespace, and, unless the pod sets
// enableServiceLinks to false, those of every Service of its namespace.
func (o *Objects) ServiceEnv(pod *corev1.Pod) (map[string]string, error) {
	enable := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	svcs, err := o.services(metav1.NamespaceDefault)
	if err != nil {
		return nil, err
	}
	if enable && pod.Namespace != metav1.NamespaceDefault {
		more, err := o.services(pod.Namespace)
		if err != nil {
			return nil, err
		}
		svcs = append(svcs, more...)
	}
	return serviceEnv(pod.Namespace, enable, svcs), nil
}

func (o *Objects) services(namespace string) ([]*corev1.Service, error) {
	if c := o.cache(namespace); c != nil {
		return c.services.List(labels.Everything())
	}
	ctx, cancel := o.lookupContext()
	defer cancel()
	list, err := o.client.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list services of %s: %w", namespace, err)
	}
	out := make([]*corev1.Service, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

// warnOnce logs msg the first time key is seen.
func (o *Objects) warnOnce(key, msg string, args ...any) {
	o.mu.Lock()
	seen := o.warned.Has(key)
	o.warned.Insert(key)
	o.mu.Unlock()
	if !seen {
		o.log.Warn(msg, args...)
	}
}
