package disruption

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubelab/kubelab/internal/util/worker"
)

// ComponentName is the source of the controller's Events: upstream's disruption
// controller records them as "controllermanager".
const ComponentName = "controllermanager"

// Config tunes the controller.
type Config struct {
	// Logger receives the controller's logs (slog.Default() when nil).
	Logger *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Controller keeps the status of PodDisruptionBudgets.
type Controller struct {
	cfg         Config
	client      kubernetes.Interface
	pdbLister   policylisters.PodDisruptionBudgetLister
	podLister   corelisters.PodLister
	scales      scaleListers
	synced      []cache.InformerSynced
	queue       workqueue.TypedRateLimitingInterface[string] // budgets
	staleQueue  workqueue.TypedRateLimitingInterface[string] // pods with a DisruptionTarget condition
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
}

// New registers the controller's informers (budgets, pods, and the workload
// controllers whose scale it reads) and handlers on factory; the caller starts the
// factory after every New.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory) (*Controller, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	pdbInf := factory.Policy().V1().PodDisruptionBudgets()
	podInf := factory.Core().V1().Pods()
	rcInf := factory.Core().V1().ReplicationControllers()
	dInf := factory.Apps().V1().Deployments()
	rsInf := factory.Apps().V1().ReplicaSets()
	ssInf := factory.Apps().V1().StatefulSets()
	broadcaster := record.NewBroadcaster()
	c := &Controller{
		cfg: cfg, client: client,
		pdbLister: pdbInf.Lister(), podLister: podInf.Lister(),
		scales: scaleListers{rcs: rcInf.Lister(), deployments: dInf.Lister(), replicaSets: rsInf.Lister(), statefulSets: ssInf.Lister()},
		synced: []cache.InformerSynced{pdbInf.Informer().HasSynced, podInf.Informer().HasSynced, rcInf.Informer().HasSynced,
			dInf.Informer().HasSynced, rsInf.Informer().HasSynced, ssInf.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "disruption"}),
		staleQueue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "stale_pod_disruption"}),
		broadcaster: broadcaster,
		recorder:    broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: ComponentName}),
	}
	if _, err := pdbInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj interface{}) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	}); err != nil {
		return nil, err
	}
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.podChanged,
		UpdateFunc: func(_, obj interface{}) { c.podChanged(obj) },
		DeleteFunc: c.podDeleted,
	}); err != nil {
		return nil, err
	}
	// Only the caches are needed of the workload controllers: a change of scale
	// reaches the budget through its pods.
	for _, inf := range []cache.SharedIndexInformer{rcInf.Informer(), dInf.Informer(), rsInf.Informer(), ssInf.Informer()} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{}); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Run waits for the caches, then keeps budgets until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	defer c.staleQueue.ShutDown()
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("disruption controller: caches did not sync: %w", ctx.Err())
	}
	worker.Start(ctx, 1, c.queue, c.sync, worker.Failed("disruption", "poddisruptionbudget", apierrors.IsConflict))
	worker.Start(ctx, 1, c.staleQueue, c.syncStalePod, worker.Failed("stale pod disruption", "pod", apierrors.IsConflict))
	<-ctx.Done()
	return nil
}

func (c *Controller) enqueue(obj interface{}) { worker.Enqueue(c.queue, obj) }

// podChanged enqueues the budget of the pod and, if it has a DisruptionTarget
// condition that may go stale, the pod for when it does.
func (c *Controller) podChanged(obj interface{}) {
	pod := obj.(*corev1.Pod)
	if pdb := c.budgetOf(pod); pdb != nil {
		c.enqueue(pdb)
	}
	if stale, after := staleDisruption(pod, c.cfg.Now()); stale {
		if key, err := cache.MetaNamespaceKeyFunc(pod); err == nil {
			c.staleQueue.AddAfter(key, after)
		}
	}
}

func (c *Controller) podDeleted(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		if pdb := c.budgetOf(pod); pdb != nil {
			c.enqueue(pdb)
		}
	}
}

// budgetOf is the budget whose selector matches pod; with several, the first, with a
// Warning Event on the pod, as upstream.
func (c *Controller) budgetOf(pod *corev1.Pod) *policyv1.PodDisruptionBudget {
	pdbs, err := c.pdbLister.GetPodPodDisruptionBudgets(pod)
	if err != nil || len(pdbs) == 0 {
		return nil
	}
	if len(pdbs) > 1 {
		msg := fmt.Sprintf("Pod %q/%q matches multiple PodDisruptionBudgets.  Chose %q arbitrarily.", pod.Namespace, pod.Name, pdbs[0].Name)
		c.cfg.Logger.Info(msg)
		c.recorder.Event(pod, corev1.EventTypeWarning, "MultiplePodDisruptionBudgets", msg)
	}
	return pdbs[0]
}
