package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// Config tunes the scheduler. Zero values take upstream's defaults.
type Config struct {
	// SchedulerName is the spec.schedulerName of the pods this scheduler places.
	SchedulerName string
	// Parallelism is the number of goroutines filtering nodes (GOMAXPROCS when zero).
	Parallelism int
	// PercentageOfNodesToScore: stop filtering after this share of the nodes fit (0: upstream's
	// adaptive share, 50% at 0 nodes down to 5% at 5,625 nodes, never fewer than 100 nodes).
	PercentageOfNodesToScore int
	// PodInitialBackoff and PodMaxBackoff bound the retry backoff (1 s and 10 s).
	PodInitialBackoff, PodMaxBackoff time.Duration
	// PodMaxInUnschedulable is how long a pod waits for a helpful cluster event before it is
	// retried anyway (5 min).
	PodMaxInUnschedulable time.Duration
	// BindTimeout bounds the wait for volumes to be bound in PreBind (10 min).
	BindTimeout time.Duration
	// DisablePreemption turns DefaultPreemption off.
	DisablePreemption bool
	// BindConcurrency bounds the pods/binding calls in flight (32), so that a burst of
	// decisions queues here rather than in the API server.
	BindConcurrency int
}

func (c *Config) validate() error {
	switch {
	case c.Parallelism < 0 || c.BindConcurrency < 0:
		return fmt.Errorf("scheduler: parallelism %d and bindConcurrency %d must not be negative", c.Parallelism, c.BindConcurrency)
	case c.PercentageOfNodesToScore < 0 || c.PercentageOfNodesToScore > 100:
		return fmt.Errorf("scheduler: percentageOfNodesToScore %d not in [0, 100]", c.PercentageOfNodesToScore)
	case c.PodInitialBackoff < 0 || c.PodMaxBackoff < 0 || c.PodMaxInUnschedulable < 0 || c.BindTimeout < 0:
		return fmt.Errorf("scheduler: durations must not be negative")
	case c.PodMaxBackoff != 0 && c.PodInitialBackoff > c.PodMaxBackoff:
		return fmt.Errorf("scheduler: podInitialBackoff %v > podMaxBackoff %v", c.PodInitialBackoff, c.PodMaxBackoff)
	}
	return nil
}

func (c *Config) defaults() {
	if c.SchedulerName == "" {
		c.SchedulerName = corev1.DefaultSchedulerName
	}
	if c.Parallelism == 0 {
		c.Parallelism = runtime.GOMAXPROCS(0)
	}
	if c.PodInitialBackoff == 0 {
		c.PodInitialBackoff = time.Second
	}
	if c.PodMaxBackoff == 0 {
		c.PodMaxBackoff = 10 * time.Second
	}
	if c.PodMaxInUnschedulable == 0 {
		c.PodMaxInUnschedulable = 5 * time.Minute
	}
	if c.BindTimeout == 0 {
		c.BindTimeout = 10 * time.Minute
	}
	if c.BindConcurrency == 0 {
		c.BindConcurrency = 32
	}
}

// Scheduler watches pending pods and binds each to a node.
type Scheduler struct {
	cfg       Config
	client    kubernetes.Interface
	clock     clock.WithTicker
	queue     *SchedulingQueue
	cache     *schedCache
	profile   *Profile
	binding   *volumeBinding
	preempt   *defaultPreemption
	podLister corelisters.PodLister
	synced    []cache.InformerSynced

	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	nextStart int
	bindSlots chan struct{}
	wg        sync.WaitGroup
}

// New builds the scheduler and registers its informers and handlers on factory (pods,
// nodes, namespaces, PVCs, PVs, StorageClasses, CSINodes, CSIDrivers). The caller starts
// factory after New.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory) (*Scheduler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	core, storage := factory.Core().V1(), factory.Storage().V1()
	pods, nodes, namespaces := core.Pods(), core.Nodes(), core.Namespaces()
	pvcs, pvs := core.PersistentVolumeClaims(), core.PersistentVolumes()
	classes, csiNodes, csiDrivers := storage.StorageClasses(), storage.CSINodes(), storage.CSIDrivers()

	nsLister := namespaces.Lister()
	nsLabels := func(name string) map[string]string {
		ns, err := nsLister.Get(name)
		if err != nil {
			return nil
		}
		return ns.Labels
	}
	s := &Scheduler{
		cfg: cfg, client: client, clock: clock.RealClock{},
		cache:     newSchedCache(nsLabels),
		podLister: pods.Lister(),
		bindSlots: make(chan struct{}, cfg.BindConcurrency),
	}
	s.queue = NewSchedulingQueue(s.clock, cfg.PodInitialBackoff, cfg.PodMaxBackoff, cfg.PodMaxInUnschedulable)
	s.broadcaster = record.NewBroadcaster()
	s.recorder = s.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: cfg.SchedulerName})

	view := &storageView{pvcs: pvcs.Lister(), pvs: pvs.Lister(), classes: classes.Lister(), csiNodes: csiNodes.Lister(), csiDrivers: csiDrivers.Lister()}
	s.binding = newVolumeBinding(view, client, cfg.BindTimeout)
	s.profile = &Profile{}
	// Upstream's default plugin order and score weights.
	s.profile.addPlugin(nodeUnschedulable{}, 0)
	s.profile.addPlugin(nodeName{}, 0)
	s.profile.addPlugin(taintToleration{}, 3)
	s.profile.addPlugin(nodeAffinity{}, 2)
	s.profile.addPlugin(nodePorts{}, 0)
	s.profile.addPlugin(&nodeResourcesFit{}, 1)
	s.profile.addPlugin(&nodeVolumeLimits{view: view}, 0)
	s.profile.addPlugin(s.binding, 0)
	s.profile.addPlugin(&volumeZone{view: view}, 0)
	s.profile.addPlugin(podTopologySpread{}, 2)
	s.profile.addPlugin(interPodAffinity{}, 2)
	s.profile.addPlugin(balancedAllocation{}, 1)
	if !cfg.DisablePreemption {
		s.preempt = &defaultPreemption{s: s}
		s.profile.addPlugin(s.preempt, 0)
	}
	s.profile.addPlugin(&defaultBinder{client: client}, 0)

	reg := func(inf cache.SharedIndexInformer, h cache.ResourceEventHandler) error {
		s.synced = append(s.synced, inf.HasSynced)
		_, err := inf.AddEventHandler(h)
		return err
	}
	move := func(interest sets.Set[string]) func(any) { return func(any) { s.queue.MoveForEvent(interest) } }
	errs := []error{
		reg(pods.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: s.onPodAdd, UpdateFunc: s.onPodUpdate, DeleteFunc: s.onPodDelete}),
		reg(nodes.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: s.onNodeAdd, UpdateFunc: s.onNodeUpdate, DeleteFunc: s.onNodeDelete}),
		reg(namespaces.Informer(), cache.ResourceEventHandlerFuncs{}),
		reg(pvcs.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { s.onClaim(o) },
			UpdateFunc: func(_, o any) { s.onClaim(o) },
		}),
		reg(pvs.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { s.onPV(o) },
			UpdateFunc: func(_, o any) { s.onPV(o) },
		}),
		reg(classes.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: move(interestStorageClass), UpdateFunc: func(_, o any) { move(interestStorageClass)(o) }}),
		reg(csiNodes.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: move(interestCSINode), UpdateFunc: func(_, o any) { move(interestCSINode)(o) }}),
		reg(csiDrivers.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: move(interestCSIDriver), UpdateFunc: func(_, o any) { move(interestCSIDriver)(o) }}),
	}
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("scheduler: register handler: %w", err)
		}
	}
	return s, nil
}

// Run schedules pods until ctx ends.
func (s *Scheduler) Run(ctx context.Context) error {
	s.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: s.client.CoreV1().Events("")})
	defer s.broadcaster.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), s.synced...) {
		return ctx.Err()
	}
	slog.InfoContext(ctx, "scheduler started", "name", s.cfg.SchedulerName)
	go s.queue.Run(ctx)
	for {
		qp, cycle := s.queue.Pop()
		if qp == nil {
			break
		}
		s.scheduleOne(ctx, qp, cycle)
	}
	s.wg.Wait()
	return nil
}

func (s *Scheduler) responsible(pod *corev1.Pod) bool {
	return pod.Spec.SchedulerName == s.cfg.SchedulerName
}

func terminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

func asPod(obj any) *corev1.Pod {
	switch o := obj.(type) {
	case *corev1.Pod:
		return o
	case cache.DeletedFinalStateUnknown:
		p, _ := o.Obj.(*corev1.Pod)
		return p
	}
	return nil
}

func (s *Scheduler) onPodAdd(obj any) {
	pod := asPod(obj)
	if pod == nil {
		return
	}
	switch {
	case pod.Spec.NodeName != "":
		if !terminal(pod) {
			s.cache.AddPod(pod)
			s.queue.MoveForEvent(interestAssignedPodChange)
		}
	case s.responsible(pod) && !terminal(pod) && pod.DeletionTimestamp == nil:
		if pod.Status.NominatedNodeName != "" {
			s.cache.Nominate(pod, pod.Status.NominatedNodeName)
		}
		s.queue.Add(pod)
	}
}

func (s *Scheduler) onPodUpdate(oldObj, obj any) {
	old, pod := asPod(oldObj), asPod(obj)
	if old == nil || pod == nil {
		return
	}
	if pod.Spec.NodeName != "" {
		if old.Spec.NodeName == "" {
			s.queue.Delete(pod) // bound (by us or by someone else)
		}
		if terminal(pod) {
			s.cache.RemovePod(pod)
			s.queue.MoveForEvent(interestAssignedPodDelete)
			return
		}
		s.cache.UpdatePod(pod)
		if old.Spec.NodeName == "" || podLabelsChanged(old, pod) {
			s.queue.MoveForEvent(interestAssignedPodChange)
		}
		if podScaledDown(old, pod) {
			s.queue.MoveForEvent(interestAssignedPodScaleDown)
		}
		return
	}
	if !s.responsible(pod) {
		return
	}
	if pod.DeletionTimestamp != nil || terminal(pod) {
		s.queue.Delete(pod)
		s.cache.Nominate(pod, "")
		return
	}
	if pod.Status.NominatedNodeName != old.Status.NominatedNodeName {
		s.cache.Nominate(pod, pod.Status.NominatedNodeName)
	}
	s.queue.Update(old, pod)
}

func (s *Scheduler) onPodDelete(obj any) {
	pod := asPod(obj)
	if pod == nil {
		return
	}
	s.cache.RemovePod(pod)
	if pod.Spec.NodeName != "" {
		s.queue.MoveForEvent(interestAssignedPodDelete)
		return
	}
	s.cache.Nominate(pod, "")
	s.queue.Delete(pod)
}

func asNode(obj any) *corev1.Node {
	switch o := obj.(type) {
	case *corev1.Node:
		return o
	case cache.DeletedFinalStateUnknown:
		n, _ := o.Obj.(*corev1.Node)
		return n
	}
	return nil
}

func (s *Scheduler) onNodeAdd(obj any) {
	if n := asNode(obj); n != nil {
		s.cache.SetNode(n)
		s.queue.MoveForEvent(interestNodeAdd)
	}
}

func (s *Scheduler) onNodeUpdate(oldObj, obj any) {
	old, n := asNode(oldObj), asNode(obj)
	if old == nil || n == nil {
		return
	}
	s.cache.SetNode(n)
	if interest := nodeUpdateInterest(old, n); interest.Len() > 0 {
		s.queue.MoveForEvent(interest)
	}
}

func (s *Scheduler) onNodeDelete(obj any) {
	if n := asNode(obj); n != nil {
		s.cache.RemoveNode(n.Name)
	}
}

func (s *Scheduler) onClaim(obj any) {
	if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok {
		s.binding.waiter.notify(claimKey(pvc))
	}
	s.queue.MoveForEvent(interestPVC)
}

func (s *Scheduler) onPV(obj any) {
	if pv, ok := obj.(*corev1.PersistentVolume); ok && pv.Spec.ClaimRef != nil {
		s.binding.waiter.notify(pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name)
	}
	s.queue.MoveForEvent(interestPV)
}
