package daemonset

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/kubelab/kubelab/internal/controller/expectations"
	"github.com/kubelab/kubelab/internal/util/history"
	"github.com/kubelab/kubelab/internal/util/podutil"
	"github.com/kubelab/kubelab/internal/util/worker"
)

// ComponentName is the source of the controller's Events, as upstream.
const ComponentName = "daemonset-controller"

// Config tunes the controller.
type Config struct {
	// Workers is the number of DaemonSets synced at once (2 when zero, as upstream).
	Workers int
}

func (c *Config) validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("daemonset controller: workers %d < 0", c.Workers)
	}
	return nil
}

// Controller runs DaemonSet pods on their nodes.
type Controller struct {
	cfg          Config
	client       kubernetes.Interface
	dsLister     appslisters.DaemonSetLister
	crLister     appslisters.ControllerRevisionLister
	podLister    corelisters.PodLister
	nodeLister   corelisters.NodeLister
	synced       []cache.InformerSynced
	queue        workqueue.TypedRateLimitingInterface[string]
	expectations *expectations.Expectations
	broadcaster  record.EventBroadcaster
	recorder     record.EventRecorder
}

// New registers the controller's informers and handlers on factory.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Workers == 0 {
		cfg.Workers = 2
	}
	dsInf := factory.Apps().V1().DaemonSets()
	crInf := factory.Apps().V1().ControllerRevisions()
	podInf := factory.Core().V1().Pods()
	nodeInf := factory.Core().V1().Nodes()
	broadcaster := record.NewBroadcaster()
	c := &Controller{
		cfg: cfg, client: client, dsLister: dsInf.Lister(), crLister: crInf.Lister(), podLister: podInf.Lister(), nodeLister: nodeInf.Lister(),
		synced: []cache.InformerSynced{dsInf.Informer().HasSynced, crInf.Informer().HasSynced, podInf.Informer().HasSynced, nodeInf.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "daemonset"}),
		expectations: expectations.New(time.Now),
		broadcaster:  broadcaster,
		recorder:     broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: ComponentName}),
	}
	if _, err := dsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj interface{}) { c.enqueue(obj) },
		DeleteFunc: func(obj interface{}) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				c.expectations.Forget(key)
			}
		},
	}); err != nil {
		return nil, err
	}
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if key, ok := ownerKey(obj.(*corev1.Pod)); ok {
				c.expectations.Created(key)
				c.queue.Add(key)
			}
		},
		UpdateFunc: func(old, obj interface{}) {
			p := obj.(*corev1.Pod)
			if key, ok := ownerKey(p); ok {
				if p.DeletionTimestamp != nil && old.(*corev1.Pod).DeletionTimestamp == nil {
					c.expectations.Deleted(key, p.Namespace+"/"+p.Name)
				}
				c.queue.Add(key)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				if key, ok := ownerKey(p); ok {
					c.expectations.Deleted(key, p.Namespace+"/"+p.Name)
					c.queue.Add(key)
				}
			}
		},
	}); err != nil {
		return nil, err
	}
	// A revision of a DaemonSet that changes or goes (a rollback renumbers one, someone
	// deletes one) has its DaemonSet looked at again.
	revisionChanged := func(obj interface{}) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		cr, ok := obj.(*appsv1.ControllerRevision)
		if !ok {
			return
		}
		if ref := metav1.GetControllerOf(cr); ref != nil && ref.Kind == "DaemonSet" && ref.APIVersion == appsv1.SchemeGroupVersion.String() {
			c.queue.Add(cr.Namespace + "/" + ref.Name)
		}
	}
	if _, err := crInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    revisionChanged,
		UpdateFunc: func(_, obj interface{}) { revisionChanged(obj) },
		DeleteFunc: revisionChanged,
	}); err != nil {
		return nil, err
	}
	if _, err := nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { c.enqueueAll() },
		UpdateFunc: func(old, obj interface{}) { c.nodeChanged(old.(*corev1.Node), obj.(*corev1.Node)) },
		DeleteFunc: func(interface{}) { c.enqueueAll() },
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func ownerKey(p *corev1.Pod) (string, bool) {
	ref := metav1.GetControllerOf(p)
	if ref == nil || ref.Kind != "DaemonSet" || ref.APIVersion != appsv1.SchemeGroupVersion.String() {
		return "", false
	}
	return p.Namespace + "/" + ref.Name, true
}

func (c *Controller) enqueue(obj interface{}) { worker.Enqueue(c.queue, obj) }

func (c *Controller) enqueueAll() {
	list, err := c.dsLister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, ds := range list {
		c.enqueue(ds)
	}
}

// nodeChanged re-examines DaemonSets when what decides eligibility changed.
func (c *Controller) nodeChanged(old, node *corev1.Node) {
	if labels.Equals(old.Labels, node.Labels) && fmt.Sprint(old.Spec.Taints) == fmt.Sprint(node.Spec.Taints) {
		return
	}
	c.enqueueAll()
}

// Run waits for the caches, then syncs DaemonSets until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("daemonset controller: caches did not sync: %w", ctx.Err())
	}
	worker.Start(ctx, c.cfg.Workers, c.queue, c.sync, worker.Failed("daemonset", "daemonset", apierrors.IsConflict))
	<-ctx.Done()
	return nil
}

// sync creates and deletes the pods of DaemonSet key and writes its status.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	ds, err := c.dsLister.DaemonSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.expectations.Forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	nodes, err := c.nodeLister.List(labels.Everything())
	if err != nil {
		return err
	}
	pods, err := c.podLister.Pods(ns).List(labels.Everything())
	if err != nil {
		return err
	}
	byNode := map[string]nodePods{}
	for _, n := range nodes {
		byNode[n.Name] = nodePods{want: shouldRun(ds, n)}
	}
	var owned, all []*corev1.Pod
	for _, p := range pods {
		if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != ds.UID {
			continue
		}
		all = append(all, p)
		if p.DeletionTimestamp == nil {
			owned = append(owned, p)
		}
	}
	sort.SliceStable(owned, func(i, j int) bool { return owned[i].CreationTimestamp.Before(&owned[j].CreationTimestamp) })
	for _, p := range owned {
		n := targetNode(p)
		np := byNode[n] // a missing node: want=false
		np.pods = append(np.pods, p)
		byNode[n] = np
	}
	gen := templateGeneration(ds)
	if ds.DeletionTimestamp != nil {
		// Going: no new revision, no pods; the status counts against the template's hash.
		hash := history.Hash(&ds.Spec.Template, ds.Status.CollisionCount)
		return c.updateStatus(ctx, ds, func(p *corev1.Pod) bool { return podUpdated(p, hash, gen) }, byNode)
	}
	cur, old, err := c.history(ctx, ds)
	if err != nil {
		return err
	}
	hash := cur.Labels[RevisionHashLabel]
	updated := func(p *corev1.Pod) bool { return podUpdated(p, hash, gen) }
	var stepErr error
	if c.expectations.Satisfied(key) {
		desired := 0
		for _, np := range byNode {
			if np.want {
				desired++
			}
		}
		maxUnavailable, err := maxUnavailableOf(ds, desired)
		if err != nil {
			return err
		}
		stepErr = c.apply(ctx, ds, key, hash, gen, decide(byNode, updated, maxUnavailable))
		if stepErr == nil {
			stepErr = c.cleanupHistory(ctx, ds, old, all)
		}
	}
	return errors.Join(stepErr, c.updateStatus(ctx, ds, updated, byNode))
}

func (c *Controller) apply(ctx context.Context, ds *appsv1.DaemonSet, key, hash string, gen *int64, a actions) error {
	if len(a.create) == 0 && len(a.delete) == 0 {
		return nil
	}
	var dels []string
	for _, p := range a.delete {
		dels = append(dels, p.Namespace+"/"+p.Name)
	}
	c.expectations.Expect(key, len(a.create), dels)
	var errs []error
	for _, node := range a.create {
		p, err := c.client.CoreV1().Pods(ds.Namespace).Create(ctx, newPod(ds, node, hash, gen), metav1.CreateOptions{})
		if err != nil {
			c.expectations.Created(key)
			if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				continue
			}
			c.recorder.Eventf(ds, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
			errs = append(errs, fmt.Errorf("create pod for node %s: %w", node, err))
			continue
		}
		c.recorder.Eventf(ds, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %s", p.Name)
	}
	for i, p := range a.delete {
		err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
		switch {
		case err == nil:
			c.recorder.Eventf(ds, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", p.Name)
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			c.expectations.Deleted(key, dels[i])
		default:
			c.expectations.Deleted(key, dels[i])
			c.recorder.Eventf(ds, corev1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
			errs = append(errs, fmt.Errorf("delete pod %s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (c *Controller) updateStatus(ctx context.Context, ds *appsv1.DaemonSet, updated func(*corev1.Pod) bool, byNode map[string]nodePods) error {
	st := ds.Status.DeepCopy()
	st.ObservedGeneration = ds.Generation
	st.DesiredNumberScheduled, st.CurrentNumberScheduled, st.NumberMisscheduled = 0, 0, 0
	st.NumberReady, st.UpdatedNumberScheduled, st.NumberAvailable, st.NumberUnavailable = 0, 0, 0, 0
	now := time.Now()
	minReady := time.Duration(ds.Spec.MinReadySeconds) * time.Second
	for _, np := range byNode {
		scheduled := false
		for _, p := range np.pods {
			if p.Spec.NodeName != "" {
				scheduled = true
			}
		}
		if np.want {
			st.DesiredNumberScheduled++
			if !scheduled {
				st.NumberUnavailable++
				continue
			}
			st.CurrentNumberScheduled++
			p := np.pods[0]
			if updated(p) {
				st.UpdatedNumberScheduled++
			}
			if podutils.IsPodReady(p) {
				st.NumberReady++
				if podutil.IsAvailable(p, minReady, now) {
					st.NumberAvailable++
					continue
				}
			}
			st.NumberUnavailable++
		} else if scheduled {
			st.NumberMisscheduled++
		}
	}
	if apiequality.Semantic.DeepEqual(*st, ds.Status) {
		return nil
	}
	out := ds.DeepCopy()
	out.Status = *st
	if _, err := c.client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, out, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update status of daemonset %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	if minReady > 0 && st.NumberReady != st.NumberAvailable {
		c.queue.AddAfter(ds.Namespace+"/"+ds.Name, minReady)
	}
	return nil
}
