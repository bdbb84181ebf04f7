package kubelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-helpers/apimachinery/lease"
	"k8s.io/utils/clock"

	"github.com/kubelab/kubelab/internal/util/hostport"
	"github.com/kubelab/kubelab/internal/util/worker"
)

// runtimeStartWait bounds how long the first node status waits for the runtime to answer.
const runtimeStartWait = 30 * time.Second

// volumeRetryMax is the longest wait between two tries of a pod whose claims are not
// bound or whose volumes are not attached yet (the first come after 100ms and double).
const volumeRetryMax = time.Second

// Deps are the node's runtime and mounter; in hollow mode nil ones get the hollow fakes.
type Deps struct {
	Runtime Runtime
	Mounter Mounter
	// Objects is the source of the ConfigMaps, Secrets and Services the pods reference
	// (real mode: one of the kubelet's own when nil); the kubelet runs it.
	Objects *Objects
	// Logger defaults to slog.Default() with the node's name.
	Logger *slog.Logger
	// Events, when set, is the process's shared event broadcaster the kubelet records
	// through (with Config.PodEvents, it writes them with the kubelet's client); nil: a
	// broadcaster of the kubelet's own.
	Events *SharedEvents
	// NodePluginLogger, in hollow mode, is where the hollow mounter, which stands in for
	// the node's CSI plugin, logs each call as the plugin would ("NodeStageVolume: called",
	// "NodeStageVolume: done" with the volume and the duration). Nil: it logs nothing.
	NodePluginLogger *slog.Logger
}

// Kubelet runs one node.
type Kubelet struct {
	cfg     Config
	client  kubernetes.Interface
	log     *slog.Logger
	runtime Runtime
	mounter Mounter
	volumes *volumeManager
	objects *Objects // real mode only
	// prober and probes run the containers' probes (real mode, when the runtime can).
	prober  ContainerProber
	probes  *probeManager
	metrics *kubeletMetrics
	ipam    *podIPs
	nodeUID atomic.Pointer[types.UID]

	podFactory, nodeFactory informers.SharedInformerFactory
	podLister               corelisters.PodLister
	nodeLister              corelisters.NodeLister
	synced                  []cache.InformerSynced
	queue                   workqueue.TypedRateLimitingInterface[string]
	// volumeRetry spaces the retries of a pod whose volumes are not ready.
	volumeRetry workqueue.TypedRateLimiter[string]

	broadcaster record.EventBroadcaster // nil with a shared one (events)
	events      *SharedEvents
	recorder    record.EventRecorder

	mu   sync.Mutex
	pods map[string]*podState // by namespace/name

	// allocations are the resources allocated to the pods (resize.go); allocMu makes
	// allocation decisions one at a time.
	allocations *allocations
	allocMu     sync.Mutex

	registered chan struct{}
}

// podState is what the kubelet remembers of a pod it runs.
type podState struct {
	uid     types.UID
	started bool
	states  []ContainerState
	ip      string
	// written is the status the API server returned for this kubelet's last status
	// write: the base of the next patch, as the pod cache may not have caught up yet.
	written *corev1.PodStatus
	// admitted says the node took the pod (admission.go); hostPorts are the hostPorts it
	// holds from then on.
	admitted  bool
	hostPorts []hostport.Port
	// resizePending and resizeInProgress are the pod's resize conditions as the kubelet
	// holds them (nil: not held); k.mu guards them.
	resizePending, resizeInProgress *corev1.PodCondition
}

// New builds the kubelet of one node. factory is shared for the cluster-wide objects it
// watches (CSIDrivers) and started by the caller after New; the node's own pods and Node
// are watched by informers of its own. The claims, volumes and attachments of its pods
// it gets by name, as the Node authorizer allows a kubelet.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory, deps Deps) (*Kubelet, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	if !cfg.Hollow && (deps.Runtime == nil || deps.Mounter == nil) {
		return nil, fmt.Errorf("kubelet %s: real mode needs a container runtime and a mounter; run with hollow=true", cfg.NodeName)
	}
	if deps.Runtime == nil {
		deps.Runtime = newHollowRuntime(cfg.PodStartDelay)
	}
	if deps.Mounter == nil {
		deps.Mounter = newHollowMounter(deps.NodePluginLogger)
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	k := &Kubelet{
		cfg: cfg, client: client, log: deps.Logger.With("node", cfg.NodeName),
		runtime: deps.Runtime, mounter: deps.Mounter, ipam: newPodIPs(),
		pods: map[string]*podState{}, registered: make(chan struct{}),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 10*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: queueName(cfg)}),
		volumeRetry: workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, volumeRetryMax),
	}
	k.podFactory = informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
	}))
	k.nodeFactory = informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", cfg.NodeName).String()
	}))
	pods, nodes := k.podFactory.Core().V1().Pods(), k.nodeFactory.Core().V1().Nodes()
	k.podLister, k.nodeLister = pods.Lister(), nodes.Lister()

	// Claims, volumes and attachments the volume manager gets by name (the Node
	// authorizer lets a kubelet read only those of its own pods, and not list them).
	drivers := factory.Storage().V1().CSIDrivers()
	k.volumes = newVolumeManager(cfg.NodeName, cfg.RootDir, client, drivers.Lister(), deps.Mounter)
	k.volumes.requeue = func(keys ...string) {
		for _, key := range keys {
			k.queue.Add(key)
		}
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{pods.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }, DeleteFunc: enqueue}},
		{nodes.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: k.onNode, UpdateFunc: func(_, o any) { k.onNode(o) }}},
		// The CSIDrivers are read from the lister only: no handler, whose listener would
		// hold a buffer and two goroutines per kubelet on an informer the hollow kubelets
		// of a process share.
		{drivers.Informer(), nil},
	}
	for _, h := range handlers {
		if h.h != nil {
			if _, err := h.inf.AddEventHandler(h.h); err != nil {
				return nil, fmt.Errorf("kubelet %s: register handler: %w", cfg.NodeName, err)
			}
		}
		k.synced = append(k.synced, h.inf.HasSynced)
	}
	if deps.Events != nil {
		k.events, k.recorder = deps.Events, deps.Events.recorder(cfg.NodeName)
	} else {
		k.broadcaster = record.NewBroadcaster()
		k.recorder = k.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: cfg.NodeName})
	}
	k.metrics = newKubeletMetrics()
	k.metrics.registry.MustRegister(podCollector{k})
	if p, ok := deps.Runtime.(ContainerProber); ok && !cfg.Hollow {
		k.prober = p
		k.probes = newProbeManager(p, clock.RealClock{}, k.recorder, k.log, func(key string) { k.queue.Add(key) })
		k.probes.metrics = k.metrics
	}
	allocPath := ""
	if !cfg.Hollow {
		allocPath = filepath.Join(cfg.RootDir, allocationFile)
	}
	allocs, err := loadAllocations(allocPath)
	if err != nil {
		k.log.Warn("pod allocations lost", "err", err)
		allocs = &allocations{path: allocPath, pods: map[types.UID]podAllocation{}}
	}
	k.allocations = allocs
	if !cfg.Hollow {
		k.volumes.local, k.volumes.nodeMemory = true, cfg.Capacity.Memory().Value()
		if err := k.useObjects(deps.Objects); err != nil {
			return nil, fmt.Errorf("kubelet %s: %w", cfg.NodeName, err)
		}
	}
	return k, nil
}

// queueName names the kubelet's work queue in the process's workqueue metrics: a real
// node's kubelet-<node>; a hollow node's queue has no name, so no metrics series and no
// goroutine updating them twice a second, thousands of which a hollow cluster would run.
func queueName(cfg Config) string {
	if cfg.Hollow {
		return ""
	}
	return "kubelet-" + cfg.NodeName
}

// onNode takes the node's podCIDR; pods that started before it was assigned get their
// address now.
func (k *Kubelet) onNode(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok || n.Spec.PodCIDR == "" {
		return
	}
	had := k.ipam.hasCIDR()
	k.ipam.setCIDR(n.Spec.PodCIDR)
	if had {
		return
	}
	pods, err := k.podLister.List(labelsEverything())
	if err != nil {
		return
	}
	for _, p := range pods {
		if p.Status.PodIP == "" && !p.Spec.HostNetwork {
			k.queue.Add(p.Namespace + "/" + p.Name)
		}
	}
}

// Pod is the node's pod ns/name as the kubelet sees it (for its server).
func (k *Kubelet) Pod(ns, name string) (*corev1.Pod, error) { return k.podLister.Pods(ns).Get(name) }

// Pods are the node's pods as the kubelet sees them (for its server's /pods).
func (k *Kubelet) Pods() ([]*corev1.Pod, error) { return k.podLister.List(labelsEverything()) }

// Registered is closed once the Node, its CSINode entry and first status are written.
func (k *Kubelet) Registered() <-chan struct{} { return k.registered }

// Run registers the node and runs its pods until ctx ends.
func (k *Kubelet) Run(ctx context.Context) error {
	defer k.queue.ShutDown()
	switch {
	case k.events != nil && k.cfg.PodEvents:
		k.events.start(k.cfg.NodeName, k.client)
		defer k.events.stop(k.cfg.NodeName)
	case k.broadcaster != nil:
		if k.cfg.PodEvents {
			k.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: k.client.CoreV1().Events("")})
		}
		defer k.broadcaster.Shutdown()
	}
	// A node whose runtime is starting with it does not report the runtime down: its first
	// status waits (briefly) for the runtime to answer. It does not wait for the runtime's
	// network: the CNI configuration of a node may wait for the node's podCIDR, which it
	// gets only once registered; until then the node is NotReady, naming the network.
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, runtimeStartWait, true, func(ctx context.Context) (bool, error) {
		_, err := k.runtime.Version(ctx)
		return err == nil, nil
	})
	// The API server may come up after us: keep trying.
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		err := k.registerNode(ctx)
		if err == nil && k.cfg.Hollow {
			err = k.registerCSIDriver(ctx)
		}
		if err == nil {
			err = k.syncNodeStatus(ctx, true)
		}
		if err != nil {
			k.log.Warn("register node", "err", err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if errors.Is(err, context.Canceled) || ctx.Err() != nil {
			return nil
		}
		return err
	}
	close(k.registered)
	var wg sync.WaitGroup
	lc := lease.NewController(clock.RealClock{}, k.client, k.cfg.NodeName, int32(k.cfg.LeaseDuration/time.Second), nil,
		k.cfg.LeaseRenewInterval, k.cfg.NodeName, corev1.NamespaceNodeLease, k.leasePostProcess)
	wg.Add(2)
	go func() { defer wg.Done(); lc.Run(ctx) }()
	k.podFactory.Start(ctx.Done())
	k.nodeFactory.Start(ctx.Done())
	defer k.podFactory.Shutdown()
	defer k.nodeFactory.Shutdown()
	go func() { defer wg.Done(); k.runNodeStatus(ctx) }()
	if !cache.WaitForCacheSync(ctx.Done(), k.synced...) {
		wg.Wait()
		return nil
	}
	k.adoptRunningPods()
	if k.objects != nil {
		wg.Add(1)
		go func() { defer wg.Done(); k.runObjects(ctx) }()
	}
	if !k.cfg.Hollow {
		wg.Add(1)
		go func() { defer wg.Done(); k.runPLEG(ctx) }()
	}
	if k.probes != nil {
		wg.Add(1)
		go func() { defer wg.Done(); k.probes.run(ctx) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); wait.UntilWithContext(ctx, k.volumes.checkExpansions, time.Second) }()
	k.log.Info("kubelet running", "zone", k.cfg.Zone, "instance", k.cfg.InstanceID, "hollow", k.cfg.Hollow)
	for i := 0; i < k.cfg.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker.Work(ctx, k.queue, k.syncQueued, k.syncFailed)
		}()
	}
	<-ctx.Done()
	k.queue.ShutDown()
	wg.Wait()
	return nil
}

// adoptRunningPods takes back the pods a previous run of this kubelet started, and
// forgets the allocations of those gone meanwhile.
func (k *Kubelet) adoptRunningPods() {
	pods, err := k.podLister.List(labelsEverything())
	if err != nil {
		return
	}
	uids := sets.New[types.UID]()
	for _, p := range pods {
		uids.Insert(p.UID)
	}
	if err := k.allocations.keepOnly(uids); err != nil {
		k.log.Warn("forget allocations of pods gone", "err", err)
	}
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && !p.Spec.HostNetwork {
			k.ipam.reserve(p.UID, p.Status.PodIP)
		}
	}
}

// syncQueued is syncPod for the worker: a pod whose volumes are not ready is looked at
// again after its own backoff.
func (k *Kubelet) syncQueued(ctx context.Context, key string) error {
	err := k.syncPod(ctx, key)
	if !errors.Is(err, errVolumesNotReady) {
		k.volumeRetry.Forget(key)
		return err
	}
	// Claims and attachments are polled (a kubelet may not watch them), soon at
	// first, then every volumeRetryMax; other waits are also woken by their event.
	return worker.RequeueAfter(k.volumeRetry.When(key))
}

// syncFailed logs a pod sync that failed and will be retried, unless the kubelet is
// stopping.
func (k *Kubelet) syncFailed(ctx context.Context, key string, err error) {
	if ctx.Err() == nil {
		k.log.Warn("sync pod", "pod", key, "err", err)
	}
}
