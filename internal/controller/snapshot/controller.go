package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	snaplisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	csiclient "github.com/kubelab/kubelab/internal/csi/client"
	"github.com/kubelab/kubelab/internal/util/snapshotutil"
	"github.com/kubelab/kubelab/internal/util/worker"
)

// Controller is the controller-manager's snapshot controller: it binds VolumeSnapshots
// and VolumeSnapshotContents.
type Controller struct {
	cfg    Config
	client kubernetes.Interface
	snaps  snapclient.Interface
	log    *slog.Logger

	snapshots snaplisters.VolumeSnapshotLister
	contents  snaplisters.VolumeSnapshotContentLister
	classes   snaplisters.VolumeSnapshotClassLister
	claims    corelisters.PersistentVolumeClaimLister
	volumes   corelisters.PersistentVolumeLister
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	recorder  *csiclient.Recorder
}

// New builds the snapshot controller and registers its handlers
// on both factories (the caller starts them after all constructors).
func New(cfg Config, client kubernetes.Interface, snaps snapclient.Interface, factory informers.SharedInformerFactory, snapFactory snapinformers.SharedInformerFactory) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if client == nil || snaps == nil || factory == nil || snapFactory == nil {
		return nil, errors.New("snapshot controller: clients and informer factories are required")
	}
	cfg.setDefaults()
	vsInf := snapFactory.Snapshot().V1().VolumeSnapshots()
	vscInf := snapFactory.Snapshot().V1().VolumeSnapshotContents()
	classInf := snapFactory.Snapshot().V1().VolumeSnapshotClasses()
	pvcInf := factory.Core().V1().PersistentVolumeClaims()
	pvInf := factory.Core().V1().PersistentVolumes()
	c := &Controller{
		cfg: cfg, client: client, snaps: snaps, log: cfg.Logger.With("controller", "snapshot-controller"),
		snapshots: vsInf.Lister(), contents: vscInf.Lister(), classes: classInf.Lister(), claims: pvcInf.Lister(), volumes: pvInf.Lister(),
		synced: []cache.InformerSynced{vsInf.Informer().HasSynced, vscInf.Informer().HasSynced, classInf.Informer().HasSynced,
			pvcInf.Informer().HasSynced, pvInf.Informer().HasSynced},
		queue:    csiclient.NewQueue("snapshot-controller", cfg.RetryIntervalStart, cfg.RetryIntervalMax),
		recorder: csiclient.NewRecorder(client, "snapshot-controller", snapshotutil.EventScheme()),
	}
	snapFn := func(obj interface{}) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if vs, ok := obj.(*snapv1.VolumeSnapshot); ok {
			c.queue.Add("vs/" + vs.Namespace + "/" + vs.Name)
		}
	}
	contentFn := func(obj interface{}) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if vsc, ok := obj.(*snapv1.VolumeSnapshotContent); ok {
			c.queue.Add("vsc/" + vsc.Name)
			ref := vsc.Spec.VolumeSnapshotRef
			c.queue.Add("vs/" + ref.Namespace + "/" + ref.Name)
		}
	}
	for _, h := range []struct {
		inf cache.SharedIndexInformer
		fn  func(interface{})
	}{{vsInf.Informer(), snapFn}, {vscInf.Informer(), contentFn}} {
		fn := h.fn
		if _, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: fn, UpdateFunc: func(_, o interface{}) { fn(o) }, DeleteFunc: fn,
		}); err != nil {
			return nil, err
		}
	}
	// A claim restored from a snapshot that becomes Bound may free the snapshot.
	if _, err := pvcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, o interface{}) {
			if pvc, ok := o.(*corev1.PersistentVolumeClaim); ok && pvc.Spec.DataSource != nil && pvc.Spec.DataSource.Kind == "VolumeSnapshot" {
				c.queue.Add("vs/" + pvc.Namespace + "/" + pvc.Spec.DataSource.Name)
			}
		},
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Run works until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	stop := c.recorder.Start()
	defer stop()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return ctx.Err()
	}
	for i := 0; i < c.cfg.Workers; i++ {
		go wait.UntilWithContext(ctx, c.worker, time.Second)
	}
	<-ctx.Done()
	return nil
}

func (c *Controller) worker(ctx context.Context) {
	worker.Work(ctx, c.queue, c.sync, worker.LogInfo(c.log, "sync failed, will retry", "key"))
}

// sync syncs one queued key: "vsc/<name>" a content, "vs/<namespace/name>" a snapshot.
func (c *Controller) sync(ctx context.Context, key string) error {
	if name, ok := strings.CutPrefix(key, "vsc/"); ok {
		return c.syncContent(ctx, name)
	}
	return c.syncSnapshot(ctx, strings.TrimPrefix(key, "vs/"))
}

func (c *Controller) syncSnapshot(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	vs, err := c.snapshots.VolumeSnapshots(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if vs.DeletionTimestamp != nil {
		return c.deleteSnapshot(ctx, vs)
	}
	if !has(vs.Finalizers, snapshotutil.FinalizerSnapshotBound) || !has(vs.Finalizers, snapshotutil.FinalizerSnapshotAsSource) {
		out := vs.DeepCopy()
		out.Finalizers = append(without(out.Finalizers, snapshotutil.FinalizerSnapshotBound, snapshotutil.FinalizerSnapshotAsSource), snapshotutil.FinalizerSnapshotAsSource, snapshotutil.FinalizerSnapshotBound)
		if vs, err = c.snaps.SnapshotV1().VolumeSnapshots(ns).Update(ctx, out, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("add finalizers to snapshot %s: %w", key, err)
		}
	}
	var content *snapv1.VolumeSnapshotContent
	switch {
	case vs.Spec.Source.VolumeSnapshotContentName != nil:
		content, err = c.contents.Get(*vs.Spec.Source.VolumeSnapshotContentName)
		if err != nil {
			return c.snapshotError(ctx, vs, fmt.Sprintf("volumesnapshotcontent %q: %v", *vs.Spec.Source.VolumeSnapshotContentName, err))
		}
		ref := content.Spec.VolumeSnapshotRef
		if ref.Namespace != vs.Namespace || ref.Name != vs.Name || (ref.UID != "" && ref.UID != vs.UID) {
			return c.snapshotError(ctx, vs, fmt.Sprintf("volumesnapshotcontent %s is bound to another snapshot", content.Name))
		}
	case vs.Spec.Source.PersistentVolumeClaimName != nil:
		content, err = c.contents.Get(contentName(vs))
		if apierrors.IsNotFound(err) {
			content, err = c.createContent(ctx, vs)
		}
		if err != nil {
			return err
		}
	default:
		return c.snapshotError(ctx, vs, "spec.source names neither a persistentVolumeClaimName nor a volumeSnapshotContentName")
	}
	return c.updateStatus(ctx, vs, content)
}

// createContent creates the content of a dynamic snapshot.
func (c *Controller) createContent(ctx context.Context, vs *snapv1.VolumeSnapshot) (*snapv1.VolumeSnapshotContent, error) {
	claimName := *vs.Spec.Source.PersistentVolumeClaimName
	pvc, err := c.claims.PersistentVolumeClaims(vs.Namespace).Get(claimName)
	if err != nil {
		return nil, c.snapshotError(ctx, vs, fmt.Sprintf("failed to get input PVC %s: %v", claimName, err))
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		return nil, c.snapshotError(ctx, vs, fmt.Sprintf("the PVC %s is not yet bound to a PV, will not attempt to take a snapshot", claimName))
	}
	pv, err := c.volumes.Get(pvc.Spec.VolumeName)
	if err != nil || pv.Spec.CSI == nil {
		return nil, c.snapshotError(ctx, vs, fmt.Sprintf("the PV %s of claim %s is not a CSI volume", pvc.Spec.VolumeName, claimName))
	}
	classes, err := c.classes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	class, err := pickClass(vs, classes, pv.Spec.CSI.Driver)
	if err != nil {
		return nil, c.snapshotError(ctx, vs, err.Error())
	}
	if class.Driver != pv.Spec.CSI.Driver {
		return nil, c.snapshotError(ctx, vs, fmt.Sprintf("snapshot class %s is for driver %s, the volume is %s's", class.Name, class.Driver, pv.Spec.CSI.Driver))
	}
	if !has(pvc.Finalizers, snapshotutil.FinalizerPVCAsSource) {
		out := pvc.DeepCopy()
		out.Finalizers = append(out.Finalizers, snapshotutil.FinalizerPVCAsSource)
		if _, err := c.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, out, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("add %s to claim %s: %w", snapshotutil.FinalizerPVCAsSource, claimName, err)
		}
	}
	content, err := c.snaps.SnapshotV1().VolumeSnapshotContents().Create(ctx, newContent(vs, class, pv), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return c.snaps.SnapshotV1().VolumeSnapshotContents().Get(ctx, contentName(vs), metav1.GetOptions{})
	}
	if err != nil {
		c.recorder.Eventf(vs, corev1.EventTypeWarning, snapshotutil.ReasonSnapshotContentFailed, "Failed to create snapshot content: %v", err)
		return nil, fmt.Errorf("create volumesnapshotcontent %s: %w", contentName(vs), err)
	}
	c.recorder.Eventf(vs, corev1.EventTypeNormal, snapshotutil.ReasonCreatingSnapshot, "Waiting for a snapshot %s/%s to be created by the CSI driver.", vs.Namespace, vs.Name)
	return content, nil
}

// updateStatus copies the content's status to the snapshot, with events for the
// steps it reached, and frees the source claim once the snapshot is ready.
func (c *Controller) updateStatus(ctx context.Context, vs *snapv1.VolumeSnapshot, content *snapv1.VolumeSnapshotContent) error {
	st := snapshotStatus(content)
	if sameStatus(vs.Status, st) {
		return c.releaseIfReady(ctx, vs, st)
	}
	wasCreated := vs.Status != nil && vs.Status.CreationTime != nil
	wasReady := vs.Status != nil && ptr.Deref(vs.Status.ReadyToUse, false)
	out := vs.DeepCopy()
	out.Status = st
	if _, err := c.snaps.SnapshotV1().VolumeSnapshots(vs.Namespace).UpdateStatus(ctx, out, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("snapshot %s/%s status: %w", vs.Namespace, vs.Name, err)
	}
	if !wasCreated && st.CreationTime != nil {
		c.recorder.Eventf(vs, corev1.EventTypeNormal, snapshotutil.ReasonSnapshotCreated, "Snapshot %s/%s was successfully created by the CSI driver.", vs.Namespace, vs.Name)
	}
	if !wasReady && ptr.Deref(st.ReadyToUse, false) {
		c.recorder.Eventf(vs, corev1.EventTypeNormal, snapshotutil.ReasonSnapshotReady, "Snapshot %s/%s is ready to use.", vs.Namespace, vs.Name)
	}
	return c.releaseIfReady(ctx, vs, st)
}

// releaseIfReady frees the source claim of a ready snapshot that still holds it.
func (c *Controller) releaseIfReady(ctx context.Context, vs *snapv1.VolumeSnapshot, st *snapv1.VolumeSnapshotStatus) error {
	claim := ptr.Deref(vs.Spec.Source.PersistentVolumeClaimName, "")
	if claim == "" || !ptr.Deref(st.ReadyToUse, false) {
		return nil
	}
	if pvc, err := c.claims.PersistentVolumeClaims(vs.Namespace).Get(claim); err != nil || !has(pvc.Finalizers, snapshotutil.FinalizerPVCAsSource) {
		return nil
	}
	return c.releaseClaim(ctx, vs.Namespace, claim)
}

// releaseClaim drops pvc-as-source-protection when no snapshot of the claim is
// still being taken.
func (c *Controller) releaseClaim(ctx context.Context, ns, claim string) error {
	all, err := c.snapshots.VolumeSnapshots(ns).List(labels.Everything())
	if err != nil {
		return err
	}
	for _, s := range all {
		if ptr.Deref(s.Spec.Source.PersistentVolumeClaimName, "") == claim && s.DeletionTimestamp == nil &&
			(s.Status == nil || !ptr.Deref(s.Status.ReadyToUse, false)) {
			if cur, err := c.snapshots.VolumeSnapshots(ns).Get(s.Name); err == nil && cur.Status != nil && ptr.Deref(cur.Status.ReadyToUse, false) {
				continue
			}
			return nil
		}
	}
	pvc, err := c.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || !has(pvc.Finalizers, snapshotutil.FinalizerPVCAsSource) {
		return err
	}
	pvc.Finalizers = without(pvc.Finalizers, snapshotutil.FinalizerPVCAsSource)
	if _, err := c.client.CoreV1().PersistentVolumeClaims(ns).Update(ctx, pvc, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove %s from claim %s/%s: %w", snapshotutil.FinalizerPVCAsSource, ns, claim, err)
	}
	return nil
}

// snapshotError records msg in the snapshot's status.error and returns it.
func (c *Controller) snapshotError(ctx context.Context, vs *snapv1.VolumeSnapshot, msg string) error {
	c.recorder.Event(vs, corev1.EventTypeWarning, snapshotutil.ReasonSnapshotCreationFailed, msg)
	out := vs.DeepCopy()
	if out.Status == nil {
		out.Status = &snapv1.VolumeSnapshotStatus{ReadyToUse: ptr.To(false)}
	}
	now := metav1.Now()
	out.Status.Error = &snapv1.VolumeSnapshotError{Time: &now, Message: ptr.To(msg)}
	if _, err := c.snaps.SnapshotV1().VolumeSnapshots(vs.Namespace).UpdateStatus(ctx, out, metav1.UpdateOptions{}); err != nil {
		c.log.InfoContext(ctx, "cannot record snapshot error", "snapshot", vs.Namespace+"/"+vs.Name, "err", err)
	}
	return errors.New(msg)
}

// deleteSnapshot handles a deleted snapshot: its content goes under Delete (or is
// released under Retain); its finalizers go once no claim is being restored from it.
func (c *Controller) deleteSnapshot(ctx context.Context, vs *snapv1.VolumeSnapshot) error {
	name := contentName(vs)
	if vs.Status != nil && vs.Status.BoundVolumeSnapshotContentName != nil {
		name = *vs.Status.BoundVolumeSnapshotContentName
	} else if vs.Spec.Source.VolumeSnapshotContentName != nil {
		name = *vs.Spec.Source.VolumeSnapshotContentName
	}
	if content, err := c.contents.Get(name); err == nil && content.DeletionTimestamp == nil &&
		content.Spec.VolumeSnapshotRef.Name == vs.Name && content.Spec.VolumeSnapshotRef.Namespace == vs.Namespace {
		if err := c.releaseContent(ctx, content); err != nil {
			return err
		}
	}
	claims, err := c.claims.PersistentVolumeClaims(vs.Namespace).List(labels.Everything())
	if err != nil {
		return err
	}
	for _, pvc := range claims {
		if ds := pvc.Spec.DataSource; ds != nil && ds.Kind == "VolumeSnapshot" && ds.Name == vs.Name && pvc.Status.Phase != corev1.ClaimBound {
			c.recorder.Eventf(vs, corev1.EventTypeNormal, snapshotutil.ReasonSnapshotDeletePending, "Snapshot is being used to restore a PVC")
			return nil // the claim's update requeues the snapshot
		}
	}
	if !has(vs.Finalizers, snapshotutil.FinalizerSnapshotBound) && !has(vs.Finalizers, snapshotutil.FinalizerSnapshotAsSource) {
		return nil
	}
	out := vs.DeepCopy()
	out.Finalizers = without(out.Finalizers, snapshotutil.FinalizerSnapshotBound, snapshotutil.FinalizerSnapshotAsSource)
	if _, err := c.snaps.SnapshotV1().VolumeSnapshots(vs.Namespace).Update(ctx, out, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizers from snapshot %s/%s: %w", vs.Namespace, vs.Name, err)
	}
	if vs.Spec.Source.PersistentVolumeClaimName != nil {
		return c.releaseClaim(ctx, vs.Namespace, *vs.Spec.Source.PersistentVolumeClaimName)
	}
	return nil
}

// releaseContent deletes a content whose snapshot is gone under Delete (the sidecar
// then deletes the storage snapshot), or drops its finalizer under Retain.
func (c *Controller) releaseContent(ctx context.Context, content *snapv1.VolumeSnapshotContent) error {
	if content.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentDelete {
		err := c.snaps.SnapshotV1().VolumeSnapshotContents().Delete(ctx, content.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete volumesnapshotcontent %s: %w", content.Name, err)
		}
		return nil
	}
	if !has(content.Finalizers, snapshotutil.FinalizerContentBound) {
		return nil
	}
	out := content.DeepCopy()
	out.Finalizers = without(out.Finalizers, snapshotutil.FinalizerContentBound)
	if _, err := c.snaps.SnapshotV1().VolumeSnapshotContents().Update(ctx, out, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("release volumesnapshotcontent %s: %w", content.Name, err)
	}
	return nil
}

// syncContent releases a content whose snapshot no longer exists.
func (c *Controller) syncContent(ctx context.Context, name string) error {
	content, err := c.contents.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || content.DeletionTimestamp != nil {
		return err
	}
	ref := content.Spec.VolumeSnapshotRef
	if ref.Name == "" {
		return nil
	}
	vs, err := c.snaps.SnapshotV1().VolumeSnapshots(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	case ref.UID == "" || vs.UID == ref.UID:
		return nil
	}
	if ref.UID == "" {
		return nil // pre-provisioned and not claimed yet
	}
	return c.releaseContent(ctx, content)
}
