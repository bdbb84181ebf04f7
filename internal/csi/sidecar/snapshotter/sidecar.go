package snapshotter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	snaplisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumesnapshot/v1"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	csiclient "github.com/kubelab/kubelab/internal/csi/client"
	"github.com/kubelab/kubelab/internal/util/snapshotutil"
	"github.com/kubelab/kubelab/internal/util/worker"
)

// Controller is the CSI snapshotter sidecar of one driver.
type Controller struct {
	cfg    Config
	client kubernetes.Interface
	snaps  snapclient.Interface
	conn   *grpc.ClientConn
	csi    csi.ControllerClient
	log    *slog.Logger

	contents snaplisters.VolumeSnapshotContentLister
	classes  snaplisters.VolumeSnapshotClassLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]

	driver   string
	recorder *csiclient.Recorder
}

// New builds the sidecar for the driver behind conn and registers its handlers on
// snapFactory (the caller starts it after all constructors).
func New(cfg Config, client kubernetes.Interface, snaps snapclient.Interface, snapFactory snapinformers.SharedInformerFactory, conn *grpc.ClientConn) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if client == nil || snaps == nil || snapFactory == nil || conn == nil {
		return nil, errors.New("snapshotter: clients, informer factory and CSI connection are required")
	}
	cfg.setDefaults()
	vscInf := snapFactory.Snapshot().V1().VolumeSnapshotContents()
	classInf := snapFactory.Snapshot().V1().VolumeSnapshotClasses()
	c := &Controller{
		cfg: cfg, client: client, snaps: snaps, conn: conn, csi: csi.NewControllerClient(conn), log: cfg.Logger,
		contents: vscInf.Lister(), classes: classInf.Lister(),
		synced: []cache.InformerSynced{vscInf.Informer().HasSynced, classInf.Informer().HasSynced},
		queue:  csiclient.NewQueue("csi-snapshotter", cfg.RetryIntervalStart, cfg.RetryIntervalMax),
	}
	fn := func(obj interface{}) {
		if vsc, ok := obj.(*snapv1.VolumeSnapshotContent); ok {
			c.queue.Add(vsc.Name)
		}
	}
	if _, err := vscInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: fn, UpdateFunc: func(_, o interface{}) { fn(o) },
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Run probes the driver, then takes and deletes snapshots until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	info, err := csiclient.DiscoverDriver(ctx, c.conn, "snapshotter", c.cfg.DriverName)
	if err != nil {
		return err
	}
	if !info.Has(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT) {
		return fmt.Errorf("snapshotter: driver %s does not offer CREATE_DELETE_SNAPSHOT", info.Name)
	}
	c.driver = info.Name
	c.recorder = csiclient.NewRecorder(c.client, "csi-snapshotter "+info.Name, snapshotutil.EventScheme())
	stop := c.recorder.Start()
	defer stop()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return ctx.Err()
	}
	c.log.InfoContext(ctx, "started", "driver", c.driver)
	for i := 0; i < c.cfg.Workers; i++ {
		go wait.UntilWithContext(ctx, c.worker, time.Second)
	}
	<-ctx.Done()
	return nil
}

func (c *Controller) worker(ctx context.Context) {
	worker.Work(ctx, c.queue, c.sync, worker.LogInfo(c.log, "sync failed, will retry", "content"))
}

func (c *Controller) sync(ctx context.Context, name string) error {
	content, err := c.contents.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	switch decideContent(content, c.driver) {
	case contentCreate:
		return c.create(ctx, content)
	case contentDelete:
		callCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		_, err := c.csi.DeleteSnapshot(callCtx, &csi.DeleteSnapshotRequest{SnapshotId: snapshotHandle(content)})
		cancel()
		if err != nil {
			c.recorder.Eventf(content, corev1.EventTypeWarning, "SnapshotDeleteError", "Failed to delete snapshot: %v", err)
			return fmt.Errorf("DeleteSnapshot %s: %w", snapshotHandle(content), err)
		}
		c.log.InfoContext(ctx, "snapshot deleted", "content", name, "snapshot", snapshotHandle(content))
		return c.dropFinalizer(ctx, content)
	case contentRelease:
		return c.dropFinalizer(ctx, content)
	}
	return nil
}

func (c *Controller) create(ctx context.Context, content *snapv1.VolumeSnapshotContent) error {
	params := map[string]string{}
	if cn := ptr.Deref(content.Spec.VolumeSnapshotClassName, ""); cn != "" {
		class, err := c.classes.Get(cn)
		if err != nil {
			return c.contentError(ctx, content, fmt.Sprintf("volumesnapshotclass %q: %v", cn, err))
		}
		params = createParams(class.Parameters)
	}
	snapName := c.cfg.SnapshotNamePrefix + "-" + string(content.Spec.VolumeSnapshotRef.UID)
	callCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	resp, err := c.csi.CreateSnapshot(callCtx, &csi.CreateSnapshotRequest{
		Name: snapName, SourceVolumeId: *content.Spec.Source.VolumeHandle, Parameters: params,
	})
	cancel()
	if err != nil {
		return c.contentError(ctx, content, fmt.Sprintf("failed to take snapshot of the volume %s: %v", *content.Spec.Source.VolumeHandle, err))
	}
	out := content.DeepCopy()
	out.Status = contentStatus(resp.GetSnapshot())
	if _, err := c.snaps.SnapshotV1().VolumeSnapshotContents().UpdateStatus(ctx, out, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("volumesnapshotcontent %s status: %w", content.Name, err)
	}
	if !resp.GetSnapshot().GetReadyToUse() {
		c.queue.AddAfter(content.Name, c.cfg.ReadyPoll) // CreateSnapshot again until ready
	} else {
		c.log.InfoContext(ctx, "snapshot ready", "content", content.Name, "snapshot", resp.GetSnapshot().GetSnapshotId())
	}
	return nil
}

func (c *Controller) contentError(ctx context.Context, content *snapv1.VolumeSnapshotContent, msg string) error {
	c.recorder.Event(content, corev1.EventTypeWarning, snapshotutil.ReasonSnapshotCreationFailed, msg)
	out := content.DeepCopy()
	if out.Status == nil {
		out.Status = &snapv1.VolumeSnapshotContentStatus{ReadyToUse: ptr.To(false)}
	}
	now := metav1.Now()
	out.Status.Error = &snapv1.VolumeSnapshotError{Time: &now, Message: ptr.To(msg)}
	if _, err := c.snaps.SnapshotV1().VolumeSnapshotContents().UpdateStatus(ctx, out, metav1.UpdateOptions{}); err != nil {
		c.log.InfoContext(ctx, "cannot record content error", "content", content.Name, "err", err)
	}
	return errors.New(msg)
}

func (c *Controller) dropFinalizer(ctx context.Context, content *snapv1.VolumeSnapshotContent) error {
	out := content.DeepCopy()
	out.Finalizers = slices.DeleteFunc(out.Finalizers, func(f string) bool { return f == snapshotutil.FinalizerContentBound })
	if _, err := c.snaps.SnapshotV1().VolumeSnapshotContents().Update(ctx, out, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer from volumesnapshotcontent %s: %w", content.Name, err)
	}
	return nil
}
