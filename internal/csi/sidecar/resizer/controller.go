package resizer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	csiclient "github.com/kubelab/kubelab/internal/csi/client"
	"github.com/kubelab/kubelab/internal/util/worker"
)

// Controller is the external-resizer of one CSI driver.
type Controller struct {
	cfg    Config
	client kubernetes.Interface
	conn   *grpc.ClientConn
	csi    csi.ControllerClient
	log    *slog.Logger

	claims  corelisters.PersistentVolumeClaimLister
	volumes corelisters.PersistentVolumeLister
	synced  []cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[string]

	driver      string
	controllerX bool // the driver has ControllerExpandVolume
	recorder    *csiclient.Recorder
}

// New builds the resizer for the driver behind conn and registers its handlers on
// factory (the caller starts it after all New calls).
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory, conn *grpc.ClientConn) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if client == nil || factory == nil || conn == nil {
		return nil, errors.New("resizer: client, informer factory and CSI connection are required")
	}
	cfg.setDefaults()
	pvcInf := factory.Core().V1().PersistentVolumeClaims()
	pvInf := factory.Core().V1().PersistentVolumes()
	c := &Controller{
		cfg: cfg, client: client, conn: conn, csi: csi.NewControllerClient(conn), log: cfg.Logger,
		claims: pvcInf.Lister(), volumes: pvInf.Lister(),
		synced: []cache.InformerSynced{pvcInf.Informer().HasSynced, pvInf.Informer().HasSynced},
		queue:  csiclient.NewQueue("resizer", cfg.RetryIntervalStart, cfg.RetryIntervalMax),
	}
	if _, err := pvcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.claimChanged, UpdateFunc: func(_, obj interface{}) { c.claimChanged(obj) },
	}); err != nil {
		return nil, err
	}
	if _, err := pvInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj interface{}) {
			if pv, ok := obj.(*corev1.PersistentVolume); ok && pv.Spec.ClaimRef != nil {
				c.queue.Add(pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name)
			}
		},
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Controller) claimChanged(obj interface{}) {
	if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok && pvc.Spec.VolumeName != "" {
		c.queue.Add(pvc.Namespace + "/" + pvc.Name)
	}
}

// Run probes the driver, then resizes until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	info, err := csiclient.DiscoverDriver(ctx, c.conn, "resizer", c.cfg.DriverName)
	if err != nil {
		return err
	}
	c.driver = info.Name
	c.controllerX = info.Has(csi.ControllerServiceCapability_RPC_EXPAND_VOLUME)
	c.recorder = csiclient.NewRecorder(c.client, "external-resizer "+info.Name, nil)
	stop := c.recorder.Start()
	defer stop()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return ctx.Err()
	}
	c.log.InfoContext(ctx, "started", "driver", c.driver, "controllerExpand", c.controllerX)
	for i := 0; i < c.cfg.Workers; i++ {
		go wait.UntilWithContext(ctx, c.worker, time.Second)
	}
	<-ctx.Done()
	return nil
}

func (c *Controller) worker(ctx context.Context) {
	worker.Work(ctx, c.queue, c.sync, worker.LogInfo(c.log, "resize failed, will retry", "claim"))
}

// sync grows the volume of one claim when it asks for more.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pvc, err := c.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pvc.Spec.VolumeName == "" {
		return nil
	}
	pv, err := c.volumes.Get(pvc.Spec.VolumeName)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !decideResize(pvc, pv, c.driver) {
		return nil
	}
	want := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if pvc, err = c.patchClaimStatus(ctx, pvc, resizingStatus(pvc, want, time.Now())); err != nil {
		return fmt.Errorf("mark claim %s resizing: %w", key, err)
	}
	c.recorder.Eventf(pvc, corev1.EventTypeNormal, ReasonResizing, "External resizer is resizing volume %s", pv.Name)

	size, nodeExpansion := want, true
	if c.controllerX {
		capability, err := csiclient.PVCapability(pv)
		if err != nil {
			return c.failed(ctx, pvc, pv, want, err, true)
		}
		callCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		resp, err := c.csi.ControllerExpandVolume(callCtx, &csi.ControllerExpandVolumeRequest{
			VolumeId: pv.Spec.CSI.VolumeHandle, CapacityRange: &csi.CapacityRange{RequiredBytes: want.Value()},
			VolumeCapability: capability,
		})
		cancel()
		if err != nil {
			return c.failed(ctx, pvc, pv, want, err, csiclient.IsFinal(err))
		}
		if resp.GetCapacityBytes() > 0 {
			size = *resource.NewQuantity(resp.GetCapacityBytes(), resource.BinarySI)
		}
		nodeExpansion = resp.GetNodeExpansionRequired()
	}
	out := pv.DeepCopy()
	out.Spec.Capacity[corev1.ResourceStorage] = size
	patch, err := csiclient.Patch(pv, out)
	if err != nil {
		return err
	}
	if _, err := c.client.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("persistentvolume %s capacity %s: %w", pv.Name, size.String(), err)
	}
	if _, err := c.patchClaimStatus(ctx, pvc, resizedStatus(pvc, size, nodeExpansion, time.Now())); err != nil {
		return fmt.Errorf("claim %s resized status: %w", key, err)
	}
	c.log.InfoContext(ctx, "volume resized", "claim", key, "pv", pv.Name, "size", size.String(), "nodeExpansion", nodeExpansion)
	if nodeExpansion {
		c.recorder.Event(pvc, corev1.EventTypeNormal, ReasonFileSystemResizeRequired, "Require file system resize of volume on node")
	} else {
		c.recorder.Event(pvc, corev1.EventTypeNormal, ReasonVolumeResizeSuccessful, "Resize volume succeeded")
	}
	return nil
}

func (c *Controller) failed(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, want resource.Quantity, cause error, final bool) error {
	msg := fmt.Sprintf("resize volume %q by resizer %q failed: %v", pv.Name, c.driver, cause)
	c.recorder.Event(pvc, corev1.EventTypeWarning, ReasonVolumeResizeFailed, msg)
	if _, err := c.patchClaimStatus(ctx, pvc, failedStatus(pvc, want, final, msg, time.Now())); err != nil {
		c.log.InfoContext(ctx, "cannot record resize failure", "claim", pvc.Namespace+"/"+pvc.Name, "err", err)
	}
	if final {
		return nil // not retried until the request changes
	}
	return errors.New(msg)
}

// patchClaimStatus writes the status changes from pvc to out: the resizer's role allows
// patch of claims' status, not update.
func (c *Controller) patchClaimStatus(ctx context.Context, pvc, out *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	patch, err := csiclient.Patch(pvc, out)
	if err != nil {
		return nil, err
	}
	return c.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Patch(ctx, pvc.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
}
