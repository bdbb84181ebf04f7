package provisioner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
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

// Controller is the external-provisioner of one CSI driver.
type Controller struct {
	cfg       Config
	client    kubernetes.Interface
	snapshots snapclient.Interface
	csi       csi.ControllerClient
	conn      *grpc.ClientConn
	log       *slog.Logger

	claims   corelisters.PersistentVolumeClaimLister
	volumes  corelisters.PersistentVolumeLister
	classes  storagelisters.StorageClassLister
	nodes    corelisters.NodeLister
	csiNodes storagelisters.CSINodeLister
	vaIdx    cache.Indexer
	synced   []cache.InformerSynced

	claimQueue  workqueue.TypedRateLimitingInterface[string]
	volumeQueue workqueue.TypedRateLimitingInterface[string]

	// deleted holds the UIDs of PVs whose storage asset was deleted (until the PV
	// object is gone).
	deleted sync.Map

	// Set by Run from the driver.
	driver   string
	info     csiclient.Info
	identity string
	recorder *csiclient.Recorder
}

// byPV indexes VolumeAttachments by the PV they attach.
const byPV = "provisioner-pv"

// New builds the provisioner for the driver behind conn and registers its handlers
// on factory (the caller starts it after all New calls). snapshots, when not nil,
// lets claims be restored from VolumeSnapshots.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory, conn *grpc.ClientConn, snapshots snapclient.Interface) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if client == nil || factory == nil || conn == nil {
		return nil, errors.New("provisioner: client, informer factory and CSI connection are required")
	}
	cfg.setDefaults()
	pvcInf := factory.Core().V1().PersistentVolumeClaims()
	pvInf := factory.Core().V1().PersistentVolumes()
	classInf := factory.Storage().V1().StorageClasses()
	nodeInf := factory.Core().V1().Nodes()
	csiNodeInf := factory.Storage().V1().CSINodes()
	vaInf := factory.Storage().V1().VolumeAttachments()
	if err := csiclient.IndexAttachmentsByPV(vaInf.Informer(), byPV); err != nil {
		return nil, fmt.Errorf("provisioner: attachment index: %w", err)
	}
	c := &Controller{
		cfg: cfg, client: client, snapshots: snapshots, conn: conn, csi: csi.NewControllerClient(conn),
		log:    cfg.Logger,
		claims: pvcInf.Lister(), volumes: pvInf.Lister(), classes: classInf.Lister(), nodes: nodeInf.Lister(),
		csiNodes: csiNodeInf.Lister(), vaIdx: vaInf.Informer().GetIndexer(),
		synced: []cache.InformerSynced{pvcInf.Informer().HasSynced, pvInf.Informer().HasSynced, classInf.Informer().HasSynced,
			nodeInf.Informer().HasSynced, csiNodeInf.Informer().HasSynced, vaInf.Informer().HasSynced},
		claimQueue:  csiclient.NewQueue("provisioner-claims", cfg.RetryIntervalStart, cfg.RetryIntervalMax),
		volumeQueue: csiclient.NewQueue("provisioner-volumes", cfg.RetryIntervalStart, cfg.RetryIntervalMax),
	}
	if _, err := pvcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.claimChanged,
		UpdateFunc: func(_, obj interface{}) { c.claimChanged(obj) },
	}); err != nil {
		return nil, err
	}
	if _, err := pvInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.volumeChanged,
		UpdateFunc: func(_, obj interface{}) { c.volumeChanged(obj) },
	}); err != nil {
		return nil, err
	}
	if _, err := pvInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pv, ok := obj.(*corev1.PersistentVolume); ok {
				c.deleted.Delete(pv.UID)
			}
		},
	}); err != nil {
		return nil, err
	}
	if _, err := vaInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if va, ok := obj.(*storagev1.VolumeAttachment); ok && va.Spec.Source.PersistentVolumeName != nil {
				c.volumeQueue.Add(*va.Spec.Source.PersistentVolumeName)
			}
		},
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Controller) claimChanged(obj interface{}) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok || pvc.Spec.VolumeName != "" {
		return
	}
	c.claimQueue.Add(pvc.Namespace + "/" + pvc.Name)
}

func (c *Controller) volumeChanged(obj interface{}) {
	if pv, ok := obj.(*corev1.PersistentVolume); ok && pv.Annotations[AnnProvisionedBy] != "" {
		c.volumeQueue.Add(pv.Name)
	}
}

// Run waits for the driver (Probe), learns its name and capabilities, then
// provisions and deletes volumes until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.claimQueue.ShutDown()
	defer c.volumeQueue.ShutDown()
	info, err := csiclient.DiscoverDriver(ctx, c.conn, "provisioner", c.cfg.DriverName)
	if err != nil {
		return err
	}
	if !info.Has(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME) {
		return fmt.Errorf("provisioner: driver %s does not offer CREATE_DELETE_VOLUME", info.Name)
	}
	c.driver, c.info = info.Name, info
	c.identity = fmt.Sprintf("%d-%d-%s", time.Now().UnixMilli(), rand.IntN(10000), info.Name)
	c.recorder = csiclient.NewRecorder(c.client, info.Name+"_"+c.cfg.Identity, nil)
	stop := c.recorder.Start()
	defer stop()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return ctx.Err()
	}
	c.log.InfoContext(ctx, "started", "driver", c.driver, "topology", info.Topology, "workers", c.cfg.Workers)
	for i := 0; i < c.cfg.Workers; i++ {
		go wait.UntilWithContext(ctx, func(ctx context.Context) { c.work(ctx, c.claimQueue, c.syncClaim) }, time.Second)
		go wait.UntilWithContext(ctx, func(ctx context.Context) { c.work(ctx, c.volumeQueue, c.syncVolume) }, time.Second)
	}
	<-ctx.Done()
	return nil
}

func (c *Controller) work(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], sync func(context.Context, string) error) {
	worker.Work(ctx, q, sync, worker.LogInfo(c.log, "sync failed, will retry", "key"))
}
