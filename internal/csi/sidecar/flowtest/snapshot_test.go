package flowtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/controller/snapshot"
	"github.com/kubelab/kubelab/internal/csi/sidecar/snapshotter"
	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/util/snapshotutil"
)

// startSnapshotter runs the snapshot controller and the CSI snapshotter sidecar.
func (e *env) startSnapshotter() *running {
	t := e.t
	client := kubernetes.NewForConfigOrDie(e.api.Config)
	snaps := snapclient.NewForConfigOrDie(e.api.Config)
	factory := informers.NewSharedInformerFactory(client, 0)
	snapFactory := snapinformers.NewSharedInformerFactory(snaps, 0)
	cfg := snapshotter.Config{DriverName: driverName, Logger: e.log, ReadyPoll: 50 * time.Millisecond,
		RetryIntervalStart: 100 * time.Millisecond, RetryIntervalMax: 2 * time.Second}
	common, err := snapshot.New(snapshot.Config{Logger: e.log, RetryIntervalStart: cfg.RetryIntervalStart, RetryIntervalMax: cfg.RetryIntervalMax},
		client, snaps, factory, snapFactory)
	if err != nil {
		t.Fatal(err)
	}
	side, err := snapshotter.New(cfg, client, snaps, snapFactory, e.dial())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, errs: make(chan error, 2)}
	factory.Start(ctx.Done())
	snapFactory.Start(ctx.Done())
	for _, x := range []runner{common, side} {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.errs <- x.Run(ctx)
		}()
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(cancel) })
	return r
}

// TestSnapshotAndRestore takes a VolumeSnapshot of a bound claim with the default
// class, restores a new claim from it, and deletes it (Delete policy: the cloud
// snapshot goes).
func TestSnapshotAndRestore(t *testing.T) {
	e := newEnv(t)
	ctrl := e.startControllers()
	defer ctrl.stop(t)
	side := e.startSidecars()
	defer side.stop(t)
	snap := e.startSnapshotter()
	defer snap.stop(t)
	ctx := context.Background()
	snaps := snapclient.NewForConfigOrDie(e.api.Config)
	ns := e.namespace("snap")
	e.storageClass("gp3", storagev1.VolumeBindingImmediate, corev1.PersistentVolumeReclaimDelete, nil)
	e.claim(ns, "src", "gp3", "1Gi")
	testutil.EventuallyWithin(t, flowTimeout, "source Bound", func() (bool, error) { return e.getClaim(ns, "src").Status.Phase == corev1.ClaimBound, nil })

	if _, err := snaps.SnapshotV1().VolumeSnapshotClasses().Create(ctx, &snapv1.VolumeSnapshotClass{
		ObjectMeta: metav1.ObjectMeta{Name: "csi-aws-vsc", Annotations: map[string]string{snapshotutil.AnnDefaultClass: "true"}},
		Driver:     driverName, DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
		// The secret key is the snapshotter's own; the driver refuses unknown keys, so
		// this also checks that it never reaches the driver.
		Parameters: map[string]string{"csi.storage.k8s.io/snapshotter-secret-name": "x"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vs, err := snaps.SnapshotV1().VolumeSnapshots(ns).Create(ctx, &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "snap1", Namespace: ns},
		Spec:       snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptr.To("src")}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, flowTimeout, "snapshot ready", func() (bool, error) {
		vs, err = snaps.SnapshotV1().VolumeSnapshots(ns).Get(ctx, "snap1", metav1.GetOptions{})
		return err == nil && vs.Status != nil && ptr.Deref(vs.Status.ReadyToUse, false), err
	})
	contentName := "snapcontent-" + string(vs.UID)
	if got := ptr.Deref(vs.Status.BoundVolumeSnapshotContentName, ""); got != contentName {
		t.Errorf("bound content %q, want %s", got, contentName)
	}
	if vs.Status.RestoreSize == nil || vs.Status.RestoreSize.Cmp(resource.MustParse("1Gi")) != 0 || vs.Status.CreationTime == nil {
		t.Errorf("snapshot status %+v", vs.Status)
	}
	for _, f := range []string{snapshotutil.FinalizerSnapshotBound, snapshotutil.FinalizerSnapshotAsSource} {
		if !hasFinalizer(vs.Finalizers, f) {
			t.Errorf("snapshot finalizers %v lack %s", vs.Finalizers, f)
		}
	}
	content, err := snaps.SnapshotV1().VolumeSnapshotContents().Get(ctx, contentName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	handle := ptr.Deref(content.Status.SnapshotHandle, "")
	if content.Spec.Driver != driverName || content.Spec.DeletionPolicy != snapv1.VolumeSnapshotContentDelete ||
		ptr.Deref(content.Spec.VolumeSnapshotClassName, "") != "csi-aws-vsc" || len(handle) < 6 || handle[:5] != "snap-" ||
		!hasFinalizer(content.Finalizers, snapshotutil.FinalizerContentBound) {
		t.Fatalf("content %+v status %+v", content.Spec, content.Status)
	}
	cs, err := e.ec2.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{SnapshotIds: []string{handle}})
	if err != nil || len(cs.Snapshots) != 1 {
		t.Fatalf("cloud snapshot %s: %v %v", handle, cs, err)
	}
	tags := map[string]string{}
	for _, tg := range cs.Snapshots[0].Tags {
		tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	if tags["CSIVolumeSnapshotName"] != "snapshot-"+string(vs.UID) {
		t.Errorf("cloud snapshot tags %v", tags)
	}
	testutil.EventuallyWithin(t, flowTimeout, "source claim released by the snapshot", func() (bool, error) {
		return !hasFinalizer(e.getClaim(ns, "src").Finalizers, snapshotutil.FinalizerPVCAsSource), nil
	})
	for _, r := range []string{snapshotutil.ReasonCreatingSnapshot, snapshotutil.ReasonSnapshotCreated, snapshotutil.ReasonSnapshotReady} {
		e.waitEvent(ns, "snap1", r)
	}

	// Restore a claim from it (the provisioner reads the snapshot's content).
	restored := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "restored", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To("gp3"),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}},
			DataSource:       &corev1.TypedLocalObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "snap1"},
		},
	}
	rc, err := e.client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, restored, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, flowTimeout, "restored claim Bound", func() (bool, error) {
		return e.getClaim(ns, "restored").Status.Phase == corev1.ClaimBound, nil
	})
	vols := e.cloudVolumes("pvc-" + string(rc.UID))
	if len(vols) != 1 || aws.ToString(vols[0].SnapshotId) != handle || aws.ToInt32(vols[0].Size) != 2 {
		t.Fatalf("restored cloud volume %+v, want one of 2 GiB from %s", vols, handle)
	}

	// Delete: the content and the cloud snapshot go.
	if err := snaps.SnapshotV1().VolumeSnapshots(ns).Delete(ctx, "snap1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, flowTimeout, "snapshot and content gone", func() (bool, error) {
		_, err1 := snaps.SnapshotV1().VolumeSnapshots(ns).Get(ctx, "snap1", metav1.GetOptions{})
		_, err2 := snaps.SnapshotV1().VolumeSnapshotContents().Get(ctx, contentName, metav1.GetOptions{})
		return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2), nil
	})
	testutil.EventuallyWithin(t, flowTimeout, "cloud snapshot deleted", func() (bool, error) {
		out, err := e.ec2.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{SnapshotIds: []string{handle}})
		return err != nil || len(out.Snapshots) == 0, nil
	})
}
