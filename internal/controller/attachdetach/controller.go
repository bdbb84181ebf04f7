package attachdetach

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubelab/kubelab/internal/util/volumeutil"
	"github.com/kubelab/kubelab/internal/util/worker"
)

// Index names (own names: the factory may be shared).
const (
	podsByNode  = "attachdetach-pod-node"
	podsByClaim = "attachdetach-pod-claim"
	vasByNode   = "attachdetach-va-node"
	vasByPV     = "attachdetach-va-pv"
)

// Controller is the attach/detach controller.
type Controller struct {
	cfg    Config
	client kubernetes.Interface
	log    *slog.Logger

	nodes      corelisters.NodeLister
	claims     corelisters.PersistentVolumeClaimLister
	volumes    corelisters.PersistentVolumeLister
	drivers    storagelisters.CSIDriverLister
	podIdx     cache.Indexer
	vaIdx      cache.Indexer
	synced     []cache.InformerSynced
	queue      workqueue.TypedRateLimitingInterface[string]
	broadcast  record.EventBroadcaster
	recorder   record.EventRecorder
	mu         sync.Mutex
	unneeded   map[string]time.Time // attachment → first seen unneeded while in use
	reportedEr map[string]string    // attachment → last attachError reported
}

// New builds the controller and registers its handlers on factory (the caller
// starts it after all New calls).
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if client == nil || factory == nil {
		return nil, errors.New("attachdetach: client and informer factory are required")
	}
	cfg.setDefaults()
	podInf := factory.Core().V1().Pods()
	nodeInf := factory.Core().V1().Nodes()
	pvcInf := factory.Core().V1().PersistentVolumeClaims()
	pvInf := factory.Core().V1().PersistentVolumes()
	vaInf := factory.Storage().V1().VolumeAttachments()
	drvInf := factory.Storage().V1().CSIDrivers()
	if err := podInf.Informer().AddIndexers(cache.Indexers{
		podsByNode: func(obj interface{}) ([]string, error) {
			if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
				return []string{p.Spec.NodeName}, nil
			}
			return nil, nil
		},
		podsByClaim: func(obj interface{}) ([]string, error) {
			p, ok := obj.(*corev1.Pod)
			if !ok {
				return nil, nil
			}
			var out []string
			for _, v := range p.Spec.Volumes {
				if n := claimName(p, v); n != "" {
					out = append(out, p.Namespace+"/"+n)
				}
			}
			return out, nil
		},
	}); err != nil {
		return nil, fmt.Errorf("attachdetach: pod index: %w", err)
	}
	if err := vaInf.Informer().AddIndexers(cache.Indexers{
		vasByNode: func(obj interface{}) ([]string, error) {
			if va, ok := obj.(*storagev1.VolumeAttachment); ok {
				return []string{va.Spec.NodeName}, nil
			}
			return nil, nil
		},
		vasByPV: func(obj interface{}) ([]string, error) {
			if va, ok := obj.(*storagev1.VolumeAttachment); ok && va.Spec.Source.PersistentVolumeName != nil {
				return []string{*va.Spec.Source.PersistentVolumeName}, nil
			}
			return nil, nil
		},
	}); err != nil {
		return nil, fmt.Errorf("attachdetach: attachment index: %w", err)
	}
	b := record.NewBroadcaster()
	c := &Controller{
		cfg: cfg, client: client, log: cfg.Logger.With("controller", Component),
		nodes: nodeInf.Lister(), claims: pvcInf.Lister(), volumes: pvInf.Lister(), drivers: drvInf.Lister(),
		podIdx: podInf.Informer().GetIndexer(), vaIdx: vaInf.Informer().GetIndexer(),
		synced: []cache.InformerSynced{podInf.Informer().HasSynced, nodeInf.Informer().HasSynced, pvcInf.Informer().HasSynced,
			pvInf.Informer().HasSynced, vaInf.Informer().HasSynced, drvInf.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "attachdetach"}),
		broadcast: b, recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: Component}),
		unneeded: map[string]time.Time{}, reportedEr: map[string]string{},
	}
	handlers := []struct {
		inf cache.SharedIndexInformer
		fn  func(interface{})
	}{
		{podInf.Informer(), c.podChanged}, {nodeInf.Informer(), c.nodeChanged}, {pvcInf.Informer(), c.claimChanged},
		{pvInf.Informer(), c.volumeChanged}, {vaInf.Informer(), c.attachmentChanged}, {drvInf.Informer(), func(interface{}) { c.enqueueAll() }},
	}
	for _, h := range handlers {
		fn := h.fn
		if _, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: fn,
			UpdateFunc: func(old, obj interface{}) {
				fn(old)
				fn(obj)
			},
			DeleteFunc: fn,
		}); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// claimName is the claim a pod volume uses: its persistentVolumeClaim, or the
// claim of a generic ephemeral volume (<pod>-<volume>).
func claimName(pod *corev1.Pod, v corev1.Volume) string {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName
	case v.Ephemeral != nil:
		return pod.Name + "-" + v.Name
	}
	return ""
}

func unwrap(obj interface{}) interface{} {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

func (c *Controller) podChanged(obj interface{}) {
	if p, ok := unwrap(obj).(*corev1.Pod); ok && p.Spec.NodeName != "" {
		c.queue.Add(p.Spec.NodeName)
	}
}

func (c *Controller) nodeChanged(obj interface{}) {
	if n, ok := unwrap(obj).(*corev1.Node); ok {
		c.queue.Add(n.Name)
	}
}

func (c *Controller) attachmentChanged(obj interface{}) {
	if va, ok := unwrap(obj).(*storagev1.VolumeAttachment); ok {
		c.queue.Add(va.Spec.NodeName)
		// A detached attachment may unblock a single-node volume elsewhere.
		if va.Spec.Source.PersistentVolumeName != nil {
			c.enqueueClaimPods(c.claimOfPV(*va.Spec.Source.PersistentVolumeName))
		}
	}
}

func (c *Controller) claimChanged(obj interface{}) {
	if pvc, ok := unwrap(obj).(*corev1.PersistentVolumeClaim); ok {
		c.enqueueClaimPods(pvc.Namespace + "/" + pvc.Name)
	}
}

func (c *Controller) volumeChanged(obj interface{}) {
	if pv, ok := unwrap(obj).(*corev1.PersistentVolume); ok && pv.Spec.ClaimRef != nil {
		c.enqueueClaimPods(pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name)
	}
}

func (c *Controller) claimOfPV(name string) string {
	pv, err := c.volumes.Get(name)
	if err != nil || pv.Spec.ClaimRef == nil {
		return ""
	}
	return pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name
}

func (c *Controller) enqueueClaimPods(key string) {
	if key == "" {
		return
	}
	pods, _ := c.podIdx.ByIndex(podsByClaim, key)
	for _, o := range pods {
		if p := o.(*corev1.Pod); p.Spec.NodeName != "" {
			c.queue.Add(p.Spec.NodeName)
		}
	}
}

func (c *Controller) enqueueAll() {
	nodes, _ := c.nodes.List(labels.Everything())
	for _, n := range nodes {
		c.queue.Add(n.Name)
	}
	for _, k := range c.vaIdx.ListIndexFuncValues(vasByNode) {
		c.queue.Add(k)
	}
}

// Run syncs nodes until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.broadcast.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	defer c.broadcast.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return ctx.Err()
	}
	c.log.InfoContext(ctx, "started", "workers", c.cfg.Workers)
	worker.Start(ctx, c.cfg.Workers, c.queue, c.sync, func(ctx context.Context, key string, err error) {
		c.log.InfoContext(ctx, "sync failed, will retry", "node", key, "err", err)
	})
	go wait.UntilWithContext(ctx, func(context.Context) { c.enqueueAll() }, c.cfg.Resync)
	<-ctx.Done()
	return nil
}

// sync brings the attachments of one node to what its pods need.
func (c *Controller) sync(ctx context.Context, nodeName string) error {
	s, err := c.state(nodeName)
	if err != nil {
		return err
	}
	p := planNode(s)
	var errs []error
	for _, w := range p.create {
		va := &storagev1.VolumeAttachment{
			ObjectMeta: metav1.ObjectMeta{Name: w.name},
			Spec: storagev1.VolumeAttachmentSpec{
				Attacher: w.driver, NodeName: nodeName,
				Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &w.pv.Name},
			},
		}
		_, err := c.client.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("create volumeattachment %s for %s on %s: %w", w.name, w.pv.Name, nodeName, err))
			continue
		}
		c.log.InfoContext(ctx, "attach requested", "pv", w.pv.Name, "node", nodeName, "va", w.name)
	}
	for _, w := range p.multiAttach {
		for _, pod := range w.pods {
			c.recorder.Eventf(pod, corev1.EventTypeWarning, ReasonFailedAttach,
				"Multi-Attach error for volume %q Volume is already exclusively attached to one node and can't be attached to another", w.pv.Name)
		}
	}
	force := map[string]bool{}
	for _, n := range p.force {
		force[n] = true
	}
	for _, name := range p.detach {
		err := c.client.StorageV1().VolumeAttachments().Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete volumeattachment %s: %w", name, err))
			continue
		}
		c.log.InfoContext(ctx, "detach requested", "va", name, "node", nodeName, "force", force[name])
		c.mu.Lock()
		delete(c.unneeded, name)
		c.mu.Unlock()
	}
	c.mu.Lock()
	for _, name := range p.waiting {
		if _, ok := c.unneeded[name]; !ok {
			c.unneeded[name] = s.now
		}
	}
	c.mu.Unlock()
	if len(p.waiting) > 0 {
		c.queue.AddAfter(nodeName, c.cfg.MaxWaitForUnmount)
	}
	c.reportAttachErrors(s)
	if s.node != nil {
		if err := c.updateVolumesAttached(ctx, s, p.attached); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// state gathers what planNode needs for a node from the caches.
func (c *Controller) state(nodeName string) (nodeState, error) {
	s := nodeState{name: nodeName, desired: map[string]wanted{}, volumes: map[string]*corev1.PersistentVolume{},
		elsewhere: map[string][]string{}, now: time.Now(), maxWait: c.cfg.MaxWaitForUnmount}
	node, err := c.nodes.Get(nodeName)
	if err != nil && !apierrors.IsNotFound(err) {
		return s, err
	}
	if err == nil {
		s.node = node
	}
	if s.node != nil && nodeManaged(s.node) {
		pods, err := c.podIdx.ByIndex(podsByNode, nodeName)
		if err != nil {
			return s, err
		}
		for _, o := range pods {
			pod := o.(*corev1.Pod)
			if podTerminated(pod) {
				continue
			}
			for _, v := range pod.Spec.Volumes {
				w, ok := c.wantedFor(pod, v, nodeName)
				if !ok {
					continue
				}
				if have, ok := s.desired[w.name]; ok {
					w.pods = append(have.pods, pod)
				} else {
					w.pods = []*corev1.Pod{pod}
				}
				s.desired[w.name] = w
			}
		}
	}
	vas, err := c.vaIdx.ByIndex(vasByNode, nodeName)
	if err != nil {
		return s, err
	}
	for _, o := range vas {
		va := o.(*storagev1.VolumeAttachment)
		s.actual = append(s.actual, va)
		if va.Spec.Source.PersistentVolumeName != nil {
			if pv, err := c.volumes.Get(*va.Spec.Source.PersistentVolumeName); err == nil {
				s.volumes[pv.Name] = pv
			}
		}
	}
	for _, w := range s.desired {
		others, _ := c.vaIdx.ByIndex(vasByPV, w.pv.Name)
		for _, o := range others {
			if va := o.(*storagev1.VolumeAttachment); va.Spec.NodeName != nodeName {
				s.elsewhere[w.pv.Name] = append(s.elsewhere[w.pv.Name], va.Spec.NodeName)
			}
		}
	}
	c.mu.Lock()
	s.unneededSince = make(map[string]time.Time, len(c.unneeded))
	for k, v := range c.unneeded {
		s.unneededSince[k] = v
	}
	c.mu.Unlock()
	return s, nil
}

// wantedFor resolves a pod volume to the CSI volume it needs attached, if any.
func (c *Controller) wantedFor(pod *corev1.Pod, v corev1.Volume, nodeName string) (wanted, bool) {
	name := claimName(pod, v)
	if name == "" {
		return wanted{}, false
	}
	pvc, err := c.claims.PersistentVolumeClaims(pod.Namespace).Get(name)
	if err != nil || pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		return wanted{}, false
	}
	pv, err := c.volumes.Get(pvc.Spec.VolumeName)
	if err != nil || pv.Spec.CSI == nil || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
		return wanted{}, false
	}
	if !c.attachRequired(pv.Spec.CSI.Driver) {
		return wanted{}, false
	}
	return wanted{name: volumeutil.AttachmentName(pv.Spec.CSI.VolumeHandle, pv.Spec.CSI.Driver, nodeName), pv: pv, driver: pv.Spec.CSI.Driver}, true
}

// attachRequired reads CSIDriver.spec.attachRequired; without the object, or the
// field, attach is required.
func (c *Controller) attachRequired(driver string) bool {
	d, err := c.drivers.Get(driver)
	if err != nil || d.Spec.AttachRequired == nil {
		return true
	}
	return *d.Spec.AttachRequired
}

// reportAttachErrors turns a new status.attachError into FailedAttachVolume events
// on the pods that wait for the volume.
func (c *Controller) reportAttachErrors(s nodeState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, va := range s.actual {
		w, needed := s.desired[va.Name]
		e := va.Status.AttachError
		if e == nil || !needed {
			delete(c.reportedEr, va.Name)
			continue
		}
		key := e.Time.String() + e.Message
		if c.reportedEr[va.Name] == key {
			continue
		}
		c.reportedEr[va.Name] = key
		for _, pod := range w.pods {
			c.recorder.Eventf(pod, corev1.EventTypeWarning, ReasonFailedAttach,
				"AttachVolume.Attach failed for volume %q : %s", w.pv.Name, e.Message)
		}
	}
}

// updateVolumesAttached writes the node's status.volumesAttached when it changed,
// and tells the pods of the volumes that joined it.
func (c *Controller) updateVolumesAttached(ctx context.Context, s nodeState, attached []corev1.AttachedVolume) error {
	if sameAttached(s.node.Status.VolumesAttached, attached) {
		return nil
	}
	list := attached
	if list == nil {
		list = []corev1.AttachedVolume{}
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"volumesAttached": list}})
	if err != nil {
		return err
	}
	if _, err := c.client.CoreV1().Nodes().Patch(ctx, s.name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("node %s status.volumesAttached: %w", s.name, err)
	}
	before := map[corev1.UniqueVolumeName]bool{}
	for _, v := range s.node.Status.VolumesAttached {
		before[v.Name] = true
	}
	for _, w := range s.desired {
		if before[w.unique()] {
			continue
		}
		for _, v := range attached {
			if v.Name == w.unique() {
				for _, pod := range w.pods {
					c.recorder.Eventf(pod, corev1.EventTypeNormal, ReasonSuccessfulAttach,
						"AttachVolume.Attach succeeded for volume %q ", w.pv.Name)
				}
			}
		}
	}
	return nil
}
