package pvbinder

import (
	"context"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/labels"
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
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/kubelab/kubelab/internal/storageclass"
	"github.com/kubelab/kubelab/internal/util/worker"
)

// Controller is the PersistentVolume controller.
type Controller struct {
	cfg    Config
	client kubernetes.Interface
	log    *slog.Logger

	claims  corelisters.PersistentVolumeClaimLister
	volumes corelisters.PersistentVolumeLister
	classes storagelisters.StorageClassLister
	volIdx  cache.Indexer
	synced  []cache.InformerSynced

	claimQueue  workqueue.TypedRateLimitingInterface[string]
	volumeQueue workqueue.TypedRateLimitingInterface[string]

	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
}

// byClaim indexes volumes by the namespace/name of their claimRef.
const byClaim = "pvbinder-claim"

// New builds the controller and registers its handlers on factory; the caller
// starts factory after all New calls.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if client == nil || factory == nil {
		return nil, fmt.Errorf("pvbinder: client and informer factory are required")
	}
	cfg.setDefaults()
	pvcInf := factory.Core().V1().PersistentVolumeClaims()
	pvInf := factory.Core().V1().PersistentVolumes()
	classInf := factory.Storage().V1().StorageClasses()
	if err := pvInf.Informer().AddIndexers(cache.Indexers{byClaim: indexByClaim}); err != nil {
		return nil, fmt.Errorf("pvbinder: volume index: %w", err)
	}
	b := record.NewBroadcaster()
	c := &Controller{
		cfg: cfg, client: client, log: cfg.Logger.With("controller", Component),
		claims: pvcInf.Lister(), volumes: pvInf.Lister(), classes: classInf.Lister(),
		volIdx: pvInf.Informer().GetIndexer(),
		synced: []cache.InformerSynced{pvcInf.Informer().HasSynced, pvInf.Informer().HasSynced, classInf.Informer().HasSynced},
		claimQueue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "claims"}),
		volumeQueue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "volumes"}),
		broadcaster: b,
		recorder:    b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: Component}),
	}
	if _, err := pvcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.claimChanged,
		UpdateFunc: func(_, obj interface{}) { c.claimChanged(obj) },
		DeleteFunc: c.claimDeleted,
	}); err != nil {
		return nil, err
	}
	if _, err := pvInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.volumeChanged,
		UpdateFunc: func(_, obj interface{}) { c.volumeChanged(obj) },
		DeleteFunc: c.volumeChanged,
	}); err != nil {
		return nil, err
	}
	if _, err := classInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.classChanged,
		UpdateFunc: func(_, obj interface{}) { c.classChanged(obj) },
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func indexByClaim(obj interface{}) ([]string, error) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok || pv.Spec.ClaimRef == nil {
		return nil, nil
	}
	return []string{pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name}, nil
}

// Run syncs claims and volumes until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.claimQueue.ShutDown()
	defer c.volumeQueue.ShutDown()
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return ctx.Err()
	}
	c.log.InfoContext(ctx, "started", "workers", c.cfg.Workers)
	worker.Start(ctx, c.cfg.Workers, c.claimQueue, c.syncClaim, c.failed)
	worker.Start(ctx, c.cfg.Workers, c.volumeQueue, c.syncVolume, c.failed)
	go wait.UntilWithContext(ctx, func(context.Context) { c.resync() }, c.cfg.Resync)
	<-ctx.Done()
	return nil
}

func (c *Controller) failed(ctx context.Context, key string, err error) {
	c.log.InfoContext(ctx, "sync failed, will retry", "key", key, "err", err)
}

// resync enqueues every claim and volume, as upstream does periodically.
func (c *Controller) resync() {
	if claims, err := c.claims.List(labels.Everything()); err == nil {
		for _, pvc := range claims {
			c.claimQueue.Add(pvc.Namespace + "/" + pvc.Name)
		}
	}
	if vols, err := c.volumes.List(labels.Everything()); err == nil {
		for _, pv := range vols {
			c.volumeQueue.Add(pv.Name)
		}
	}
}

func (c *Controller) claimChanged(obj interface{}) {
	if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok {
		c.claimQueue.Add(pvc.Namespace + "/" + pvc.Name)
		if pvc.Spec.VolumeName != "" {
			c.volumeQueue.Add(pvc.Spec.VolumeName)
		}
	}
}

func (c *Controller) claimDeleted(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return
	}
	if pvc.Spec.VolumeName != "" {
		c.volumeQueue.Add(pvc.Spec.VolumeName)
	}
	vols, _ := c.volIdx.ByIndex(byClaim, pvc.Namespace+"/"+pvc.Name)
	for _, o := range vols {
		c.volumeQueue.Add(o.(*corev1.PersistentVolume).Name)
	}
}

func (c *Controller) volumeChanged(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok {
		return
	}
	c.volumeQueue.Add(pv.Name)
	if ref := pv.Spec.ClaimRef; ref != nil {
		c.claimQueue.Add(ref.Namespace + "/" + ref.Name)
		return
	}
	// A free volume may match a waiting claim of its class.
	c.enqueuePendingClaims(storagehelpers.GetPersistentVolumeClass(pv))
}

func (c *Controller) classChanged(obj interface{}) {
	if class, ok := obj.(*storagev1.StorageClass); ok {
		c.enqueuePendingClaims(class.Name)
		if storageclass.IsDefault(class) {
			c.enqueuePendingClaims("") // claims without a class may get this one
		}
	}
}

func (c *Controller) enqueuePendingClaims(class string) {
	claims, err := c.claims.List(labels.Everything())
	if err != nil {
		return
	}
	for _, pvc := range claims {
		if pvc.Spec.VolumeName == "" && storagehelpers.GetPersistentVolumeClaimClass(pvc) == class {
			c.claimQueue.Add(pvc.Namespace + "/" + pvc.Name)
		}
	}
}
