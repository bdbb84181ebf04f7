package attacher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	csiclient "github.com/kubelab/kubelab/internal/csi/client"
	"github.com/kubelab/kubelab/internal/util/worker"
)

// Controller is the external-attacher of one CSI driver.
type Controller struct {
	cfg    Config
	client kubernetes.Interface
	conn   *grpc.ClientConn
	csi    csi.ControllerClient
	log    *slog.Logger

	attachments storagelisters.VolumeAttachmentLister
	volumes     corelisters.PersistentVolumeLister
	csiNodes    storagelisters.CSINodeLister
	vaIdx       cache.Indexer
	synced      []cache.InformerSynced

	vaQueue workqueue.TypedRateLimitingInterface[string]
	pvQueue workqueue.TypedRateLimitingInterface[string]

	driver  string
	trivial bool // the driver has no ControllerPublishVolume

	// attached holds the UIDs of attachments this attacher marked attached, until
	// the cache shows it: an older cached copy must not publish again.
	attached sync.Map
}

// byPV indexes VolumeAttachments by their PV (a name of its own: the factory may be
// shared with other components).
const byPV = "attacher-pv"

// New builds the attacher for the driver behind conn and registers its handlers on
// factory (the caller starts it after all New calls).
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory, conn *grpc.ClientConn) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if client == nil || factory == nil || conn == nil {
		return nil, errors.New("attacher: client, informer factory and CSI connection are required")
	}
	cfg.setDefaults()
	vaInf := factory.Storage().V1().VolumeAttachments()
	pvInf := factory.Core().V1().PersistentVolumes()
	csiNodeInf := factory.Storage().V1().CSINodes()
	if err := csiclient.IndexAttachmentsByPV(vaInf.Informer(), byPV); err != nil {
		return nil, fmt.Errorf("attacher: attachment index: %w", err)
	}
	c := &Controller{
		cfg: cfg, client: client, conn: conn, csi: csi.NewControllerClient(conn),
		log:         cfg.Logger,
		attachments: vaInf.Lister(), volumes: pvInf.Lister(), csiNodes: csiNodeInf.Lister(),
		vaIdx:   vaInf.Informer().GetIndexer(),
		synced:  []cache.InformerSynced{vaInf.Informer().HasSynced, pvInf.Informer().HasSynced, csiNodeInf.Informer().HasSynced},
		vaQueue: csiclient.NewQueue("attacher-va", cfg.RetryIntervalStart, cfg.RetryIntervalMax),
		pvQueue: csiclient.NewQueue("attacher-pv", cfg.RetryIntervalStart, cfg.RetryIntervalMax),
	}
	if _, err := vaInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.attachmentChanged,
		UpdateFunc: func(_, obj interface{}) { c.attachmentChanged(obj) },
		DeleteFunc: c.attachmentChanged,
	}); err != nil {
		return nil, err
	}
	if _, err := pvInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.volumeChanged,
		UpdateFunc: func(_, obj interface{}) { c.volumeChanged(obj) },
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Controller) attachmentChanged(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	va, ok := obj.(*storagev1.VolumeAttachment)
	if !ok {
		return
	}
	c.vaQueue.Add(va.Name)
	if va.Spec.Source.PersistentVolumeName != nil {
		c.pvQueue.Add(*va.Spec.Source.PersistentVolumeName)
	}
}

func (c *Controller) volumeChanged(obj interface{}) {
	if pv, ok := obj.(*corev1.PersistentVolume); ok && pv.DeletionTimestamp != nil {
		c.pvQueue.Add(pv.Name)
	}
}

// Run probes the driver, then attaches and detaches until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.vaQueue.ShutDown()
	defer c.pvQueue.ShutDown()
	info, err := csiclient.DiscoverDriver(ctx, c.conn, "attacher", c.cfg.DriverName)
	if err != nil {
		return err
	}
	c.driver = info.Name
	c.trivial = !info.Has(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME)
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return ctx.Err()
	}
	c.log.InfoContext(ctx, "started", "driver", c.driver, "trivial", c.trivial, "workers", c.cfg.Workers)
	for i := 0; i < c.cfg.Workers; i++ {
		go wait.UntilWithContext(ctx, func(ctx context.Context) { c.work(ctx, c.vaQueue, c.syncAttachment) }, time.Second)
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) { c.work(ctx, c.pvQueue, c.syncVolume) }, time.Second)
	<-ctx.Done()
	return nil
}

func (c *Controller) work(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], sync func(context.Context, string) error) {
	worker.Work(ctx, q, sync, worker.LogInfo(c.log, "sync failed, will retry", "key"))
}

// syncAttachment attaches or detaches one VolumeAttachment.
func (c *Controller) syncAttachment(ctx context.Context, name string) error {
	va, err := c.attachments.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if va.Status.Attached || va.DeletionTimestamp != nil {
		c.attached.Delete(va.UID)
	}
	switch decideAttachment(va, c.driver) {
	case stepAttach:
		if _, done := c.attached.Load(va.UID); done {
			return nil // the cache is behind our own status write
		}
		if c.trivial {
			return c.markAttached(ctx, va, nil)
		}
		return c.attach(ctx, va)
	case stepDetach:
		return c.detach(ctx, va)
	}
	return nil
}

func (c *Controller) attach(ctx context.Context, va *storagev1.VolumeAttachment) error {
	if va.Spec.Source.PersistentVolumeName == nil {
		return c.attachFailed(ctx, va, errors.New("inline volumes are not supported: spec.source.persistentVolumeName is empty"))
	}
	pv, err := c.volumes.Get(*va.Spec.Source.PersistentVolumeName)
	if err != nil {
		return c.attachFailed(ctx, va, fmt.Errorf("persistentvolume %q: %w", *va.Spec.Source.PersistentVolumeName, err))
	}
	fin := Finalizer(c.driver)
	if pv.DeletionTimestamp == nil && !hasFinalizer(pv.Finalizers, fin) {
		out := pv.DeepCopy()
		out.Finalizers = append(out.Finalizers, fin)
		if pv, err = c.patchVolume(ctx, pv, out); err != nil {
			return fmt.Errorf("add finalizer to persistentvolume %s: %w", out.Name, err)
		}
	}
	csiNode, _ := c.csiNodes.Get(va.Spec.NodeName)
	id, err := nodeID(c.driver, va.Spec.NodeName, csiNode, nil)
	if err != nil {
		return c.attachFailed(ctx, va, err)
	}
	if !hasFinalizer(va.Finalizers, fin) || va.Annotations[AnnNodeID] != id {
		out := va.DeepCopy()
		if !hasFinalizer(out.Finalizers, fin) {
			out.Finalizers = append(out.Finalizers, fin)
		}
		metav1.SetMetaDataAnnotation(&out.ObjectMeta, AnnNodeID, id)
		if va, err = c.patchAttachment(ctx, va, out); err != nil {
			return fmt.Errorf("add finalizer to volumeattachment %s: %w", out.Name, err)
		}
	}
	req, err := publishRequest(pv, id)
	if err != nil {
		return c.attachFailed(ctx, va, err)
	}
	c.log.InfoContext(ctx, "attaching", "va", va.Name, "pv", pv.Name, "volume", req.GetVolumeId(), "node", va.Spec.NodeName)
	callCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	resp, err := c.csi.ControllerPublishVolume(callCtx, req)
	cancel()
	if err != nil {
		c.log.InfoContext(ctx, "attach failed", "va", va.Name, "volume", req.GetVolumeId(), "node", va.Spec.NodeName, "err", err)
		return c.attachFailed(ctx, va, err)
	}
	c.log.InfoContext(ctx, "attached", "va", va.Name, "pv", pv.Name, "volume", req.GetVolumeId(), "node", va.Spec.NodeName, "context", resp.GetPublishContext())
	return c.markAttached(ctx, va, resp.GetPublishContext())
}

func (c *Controller) markAttached(ctx context.Context, va *storagev1.VolumeAttachment, publishContext map[string]string) error {
	out := va.DeepCopy()
	out.Status.Attached = true
	out.Status.AttachmentMetadata = publishContext
	out.Status.AttachError = nil
	if _, err := c.patchAttachment(ctx, va, out, "status"); err != nil {
		return fmt.Errorf("mark volumeattachment %s attached: %w", va.Name, err)
	}
	c.attached.Store(va.UID, struct{}{})
	return nil
}

// attachFailed records err in status.attachError and returns it for a retry.
func (c *Controller) attachFailed(ctx context.Context, va *storagev1.VolumeAttachment, cause error) error {
	out := va.DeepCopy()
	out.Status.AttachError = &storagev1.VolumeError{Time: metav1.Now(), Message: cause.Error()}
	if _, err := c.patchAttachment(ctx, va, out, "status"); err != nil && !apierrors.IsNotFound(err) {
		c.log.InfoContext(ctx, "cannot record attach error", "va", va.Name, "err", err)
	}
	return fmt.Errorf("attach %s: %w", va.Name, cause)
}

func (c *Controller) detach(ctx context.Context, va *storagev1.VolumeAttachment) error {
	id := va.Annotations[AnnNodeID]
	if id == "" {
		csiNode, _ := c.csiNodes.Get(va.Spec.NodeName)
		var err error
		if id, err = nodeID(c.driver, va.Spec.NodeName, csiNode, va); err != nil {
			return c.detachFailed(ctx, va, err)
		}
	}
	if va.Spec.Source.PersistentVolumeName != nil && !c.trivial {
		pv, err := c.volumes.Get(*va.Spec.Source.PersistentVolumeName)
		if err != nil {
			return c.detachFailed(ctx, va, fmt.Errorf("persistentvolume %q: %w", *va.Spec.Source.PersistentVolumeName, err))
		}
		if pv.Spec.CSI == nil {
			return c.detachFailed(ctx, va, fmt.Errorf("persistentvolume %s is not a CSI volume", pv.Name))
		}
		callCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		_, err = c.csi.ControllerUnpublishVolume(callCtx, &csi.ControllerUnpublishVolumeRequest{VolumeId: pv.Spec.CSI.VolumeHandle, NodeId: id})
		cancel()
		if err != nil {
			return c.detachFailed(ctx, va, err)
		}
	}
	out := va.DeepCopy()
	out.Status.Attached = false
	out.Status.DetachError = nil
	out.Status.AttachmentMetadata = nil
	va, err := c.patchAttachment(ctx, va, out, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mark volumeattachment %s detached: %w", out.Name, err)
	}
	out = va.DeepCopy()
	out.Finalizers = withoutFinalizer(out.Finalizers, Finalizer(c.driver))
	if _, err := c.patchAttachment(ctx, va, out); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer from volumeattachment %s: %w", out.Name, err)
	}
	c.log.InfoContext(ctx, "detached", "va", va.Name, "node", va.Spec.NodeName)
	return nil
}

func (c *Controller) detachFailed(ctx context.Context, va *storagev1.VolumeAttachment, cause error) error {
	out := va.DeepCopy()
	out.Status.DetachError = &storagev1.VolumeError{Time: metav1.Now(), Message: cause.Error()}
	if _, err := c.patchAttachment(ctx, va, out, "status"); err != nil && !apierrors.IsNotFound(err) {
		c.log.InfoContext(ctx, "cannot record detach error", "va", va.Name, "err", err)
	}
	return fmt.Errorf("detach %s: %w", va.Name, cause)
}

// syncVolume removes the attacher's finalizer from a PV being deleted once no
// VolumeAttachment names it.
func (c *Controller) syncVolume(ctx context.Context, name string) error {
	pv, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	objs, err := c.vaIdx.ByIndex(byPV, name)
	if err != nil {
		return err
	}
	n := 0
	for _, o := range objs {
		if o.(*storagev1.VolumeAttachment).Spec.Attacher == c.driver {
			n++
		}
	}
	if !decideVolume(pv, c.driver, n) {
		return nil
	}
	out := pv.DeepCopy()
	out.Finalizers = withoutFinalizer(out.Finalizers, Finalizer(c.driver))
	if _, err := c.patchVolume(ctx, pv, out); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer from persistentvolume %s: %w", name, err)
	}
	return nil
}

// patchAttachment writes the changes from va to out (to subresource, e.g. "status"): the
// attacher's role allows patch, not update.
func (c *Controller) patchAttachment(ctx context.Context, va, out *storagev1.VolumeAttachment, subresource ...string) (*storagev1.VolumeAttachment, error) {
	patch, err := csiclient.Patch(va, out)
	if err != nil {
		return nil, err
	}
	return c.client.StorageV1().VolumeAttachments().Patch(ctx, va.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, subresource...)
}

// patchVolume writes the changes from pv to out.
func (c *Controller) patchVolume(ctx context.Context, pv, out *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	patch, err := csiclient.Patch(pv, out)
	if err != nil {
		return nil, err
	}
	return c.client.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
}
