package statefulset

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/util/podutil"
	"github.com/kubelab/kubelab/internal/util/worker"
)

// ComponentName is the source of the controller's Events, as upstream.
const ComponentName = "statefulset-controller"

type metav1OwnerRef = metav1.OwnerReference

func controllerRef(set *appsv1.StatefulSet) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "StatefulSet", Name: set.Name, UID: set.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// Config tunes the controller.
type Config struct {
	// Workers is the number of StatefulSets synced at once (5 when zero).
	Workers int
}

func (c *Config) validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("statefulset controller: workers %d < 0", c.Workers)
	}
	return nil
}

// Controller keeps the pods and claims of StatefulSets.
type Controller struct {
	cfg         Config
	client      kubernetes.Interface
	setLister   appslisters.StatefulSetLister
	podLister   corelisters.PodLister
	pvcLister   corelisters.PersistentVolumeClaimLister
	crLister    appslisters.ControllerRevisionLister
	synced      []cache.InformerSynced
	queue       workqueue.TypedRateLimitingInterface[string]
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
}

// New registers the controller's informers and handlers on factory.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Workers == 0 {
		cfg.Workers = 5
	}
	setInf := factory.Apps().V1().StatefulSets()
	podInf := factory.Core().V1().Pods()
	pvcInf := factory.Core().V1().PersistentVolumeClaims()
	crInf := factory.Apps().V1().ControllerRevisions()
	broadcaster := record.NewBroadcaster()
	c := &Controller{
		cfg: cfg, client: client, setLister: setInf.Lister(), podLister: podInf.Lister(), pvcLister: pvcInf.Lister(), crLister: crInf.Lister(),
		synced: []cache.InformerSynced{setInf.Informer().HasSynced, podInf.Informer().HasSynced, pvcInf.Informer().HasSynced,
			crInf.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "statefulset"}),
		broadcaster: broadcaster,
		recorder:    broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: ComponentName}),
	}
	if _, err := setInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj interface{}) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	}); err != nil {
		return nil, err
	}
	podChanged := func(obj interface{}) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "StatefulSet" {
				c.queue.Add(p.Namespace + "/" + ref.Name)
			}
		}
	}
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    podChanged,
		UpdateFunc: func(_, obj interface{}) { podChanged(obj) },
		DeleteFunc: podChanged,
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Run waits for the caches, then syncs StatefulSets until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("statefulset controller: caches did not sync: %w", ctx.Err())
	}
	worker.Start(ctx, c.cfg.Workers, c.queue, c.sync, worker.Failed("statefulset", "statefulset", func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }))
	<-ctx.Done()
	return nil
}

func (c *Controller) enqueue(obj interface{}) { worker.Enqueue(c.queue, obj) }

// sync creates, deletes and updates the pods of StatefulSet key one step, and writes
// its status.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	set, err := c.setLister.StatefulSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	selector, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		return nil
	}
	all, err := c.podLister.Pods(ns).List(selector)
	if err != nil {
		return err
	}
	pods := map[int]*corev1.Pod{}
	states := map[int]podState{}
	for _, p := range all {
		ref := metav1.GetControllerOf(p)
		if ref == nil || ref.UID != set.UID {
			continue
		}
		ord, ok := ordinalOf(set.Name, p.Name)
		if !ok {
			continue
		}
		pods[ord] = p
		states[ord] = podState{exists: true, terminating: p.DeletionTimestamp != nil,
			failed:       p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded,
			runningReady: podutil.IsRunningAndReady(p), revision: p.Labels[RevisionHashLabel]}
	}
	if set.DeletionTimestamp != nil {
		return c.updateStatus(ctx, set, set.Status.CurrentRevision, set.Status.UpdateRevision, pods)
	}
	revs, err := c.revisions(ctx, set)
	if err != nil {
		return err
	}
	current, update, err := c.history(ctx, set, revs)
	if err != nil {
		return err
	}
	var updateRev *string
	partition := -1 // OnDelete: new pods get the update revision
	if set.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		updateRev = &update.Name
		partition = 0
		if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
			partition = int(*ru.Partition)
		}
	}
	start := startOrdinal(set)
	s := plan(start, start+replicas(set), states, set.Spec.PodManagementPolicy == appsv1.ParallelPodManagement, updateRev, partition)
	stepErr := c.apply(ctx, set, current, update, start+partition, s, pods)
	live := map[string]bool{current.Name: true, update.Name: true}
	for _, p := range pods {
		live[p.Labels[RevisionHashLabel]] = true
	}
	return errors.Join(stepErr, c.updateStatus(ctx, set, current.Name, update.Name, pods), c.cleanupHistory(ctx, set, revs, live))
}

// apply creates and deletes pods as s says. A pod below the partition (ordinal below
// startOrdinal+partition, given as below) is created at the current revision, the others
// at the update revision.
func (c *Controller) apply(ctx context.Context, set *appsv1.StatefulSet, current, update *appsv1.ControllerRevision, below int, s step, pods map[int]*corev1.Pod) error {
	var errs []error
	for _, ord := range s.create {
		if err := c.createClaims(ctx, set, ord); err != nil {
			errs = append(errs, err)
			continue
		}
		from, rev := set, update
		if ord < below && current.Name != update.Name {
			old, err := templateAt(set, current)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			from, rev = old, current
		}
		p := newPod(from, ord, rev.Name)
		_, err := c.client.CoreV1().Pods(set.Namespace).Create(ctx, p, metav1.CreateOptions{})
		switch {
		case err == nil:
			c.recorder.Eventf(set, corev1.EventTypeNormal, "SuccessfulCreate", "create Pod %s in StatefulSet %s successful", p.Name, set.Name)
		case apierrors.IsAlreadyExists(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		default:
			c.recorder.Eventf(set, corev1.EventTypeWarning, "FailedCreate", "create Pod %s in StatefulSet %s failed error: %v", p.Name, set.Name, err)
			errs = append(errs, fmt.Errorf("create pod %s: %w", p.Name, err))
		}
	}
	for _, ord := range s.delete {
		p := pods[ord]
		if p == nil {
			continue
		}
		err := c.client.CoreV1().Pods(set.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
		switch {
		case err == nil:
			c.recorder.Eventf(set, corev1.EventTypeNormal, "SuccessfulDelete", "delete Pod %s in StatefulSet %s successful", p.Name, set.Name)
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		default:
			c.recorder.Eventf(set, corev1.EventTypeWarning, "FailedDelete", "delete Pod %s in StatefulSet %s failed error: %v", p.Name, set.Name, err)
			errs = append(errs, fmt.Errorf("delete pod %s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// createClaims creates the missing PVCs of pod ord; existing ones are kept as they are.
func (c *Controller) createClaims(ctx context.Context, set *appsv1.StatefulSet, ord int) error {
	for _, pvc := range newClaims(set, ord) {
		if _, err := c.pvcLister.PersistentVolumeClaims(set.Namespace).Get(pvc.Name); err == nil {
			continue
		}
		_, err := c.client.CoreV1().PersistentVolumeClaims(set.Namespace).Create(ctx, pvc, metav1.CreateOptions{})
		switch {
		case err == nil:
			c.recorder.Eventf(set, corev1.EventTypeNormal, "SuccessfulCreate", "create Claim %s Pod %s in StatefulSet %s success",
				pvc.Name, podName(set, ord), set.Name)
		case apierrors.IsAlreadyExists(err):
		default:
			c.recorder.Eventf(set, corev1.EventTypeWarning, "FailedCreate", "create Claim %s for Pod %s in StatefulSet %s failed error: %v",
				pvc.Name, podName(set, ord), set.Name, err)
			return fmt.Errorf("create claim %s: %w", pvc.Name, err)
		}
	}
	return nil
}

// updateStatus writes set's status: its pods counted (current and updated ones by their
// revision), the current and update revisions, the current one becoming the update one
// once every replica runs it and is ready.
func (c *Controller) updateStatus(ctx context.Context, set *appsv1.StatefulSet, current, rev string, pods map[int]*corev1.Pod) error {
	st := set.Status.DeepCopy()
	st.ObservedGeneration = set.Generation
	st.Replicas, st.ReadyReplicas, st.AvailableReplicas, st.CurrentReplicas, st.UpdatedReplicas = 0, 0, 0, 0, 0
	st.CurrentRevision, st.UpdateRevision = current, rev
	now := time.Now()
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		st.Replicas++
		if podutil.IsRunningAndReady(p) {
			st.ReadyReplicas++
			if podutil.IsAvailable(p, time.Duration(set.Spec.MinReadySeconds)*time.Second, now) {
				st.AvailableReplicas++
			}
		}
		if p.Labels[RevisionHashLabel] == st.CurrentRevision {
			st.CurrentReplicas++
		}
		if p.Labels[RevisionHashLabel] == rev {
			st.UpdatedReplicas++
		}
	}
	// The update is complete once every replica runs the new revision.
	if st.UpdatedReplicas == int32(replicas(set)) && st.Replicas == int32(replicas(set)) && st.ReadyReplicas == st.Replicas {
		st.CurrentRevision, st.CurrentReplicas = rev, st.UpdatedReplicas
	}
	if equalStatus(&set.Status, st) {
		return nil
	}
	out := set.DeepCopy()
	out.Status = *st
	_, err := c.client.AppsV1().StatefulSets(set.Namespace).UpdateStatus(ctx, out, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update status of statefulset %s/%s: %w", set.Namespace, set.Name, err)
	}
	if set.Spec.MinReadySeconds > 0 && st.AvailableReplicas != st.ReadyReplicas {
		c.queue.AddAfter(set.Namespace+"/"+set.Name, time.Duration(set.Spec.MinReadySeconds)*time.Second)
	}
	return nil
}

func equalStatus(a, b *appsv1.StatefulSetStatus) bool {
	return a.ObservedGeneration == b.ObservedGeneration && a.Replicas == b.Replicas && a.ReadyReplicas == b.ReadyReplicas &&
		a.AvailableReplicas == b.AvailableReplicas && a.CurrentReplicas == b.CurrentReplicas && a.UpdatedReplicas == b.UpdatedReplicas &&
		a.CurrentRevision == b.CurrentRevision && a.UpdateRevision == b.UpdateRevision
}
