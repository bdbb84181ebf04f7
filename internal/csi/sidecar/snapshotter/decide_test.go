package snapshotter

import (
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/util/snapshotutil"
)

const drv = "ebs.csi.aws.com"

func TestDecideContent(t *testing.T) {
	now := metav1.Now()
	mk := func(mut func(*snapv1.VolumeSnapshotContent)) *snapv1.VolumeSnapshotContent {
		c := &snapv1.VolumeSnapshotContent{ObjectMeta: metav1.ObjectMeta{Finalizers: []string{snapshotutil.FinalizerContentBound}},
			Spec: snapv1.VolumeSnapshotContentSpec{Driver: drv, DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
				Source: snapv1.VolumeSnapshotContentSource{VolumeHandle: ptr.To("vol-1")}}}
		if mut != nil {
			mut(c)
		}
		return c
	}
	ready := func(c *snapv1.VolumeSnapshotContent) {
		c.Status = &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: ptr.To("snap-1"), ReadyToUse: ptr.To(true)}
	}
	deleting := func(c *snapv1.VolumeSnapshotContent) { c.DeletionTimestamp = &now }
	cases := []struct {
		name string
		c    *snapv1.VolumeSnapshotContent
		want contentStep
	}{
		{"new", mk(nil), contentCreate},
		{"pending", mk(func(c *snapv1.VolumeSnapshotContent) {
			c.Status = &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: ptr.To("snap-1"), ReadyToUse: ptr.To(false)}
		}), contentCreate},
		{"ready", mk(ready), contentNothing},
		{"other driver", mk(func(c *snapv1.VolumeSnapshotContent) { c.Spec.Driver = "x" }), contentNothing},
		{"pre-provisioned", mk(func(c *snapv1.VolumeSnapshotContent) {
			c.Spec.Source = snapv1.VolumeSnapshotContentSource{SnapshotHandle: ptr.To("snap-9")}
		}), contentNothing},
		{"deleted under Delete", mk(func(c *snapv1.VolumeSnapshotContent) { ready(c); deleting(c) }), contentDelete},
		{"deleted under Retain", mk(func(c *snapv1.VolumeSnapshotContent) {
			ready(c)
			deleting(c)
			c.Spec.DeletionPolicy = snapv1.VolumeSnapshotContentRetain
		}), contentRelease},
		{"deleted before any snapshot", mk(deleting), contentRelease},
		{"deleted, finalizer gone", mk(func(c *snapv1.VolumeSnapshotContent) { ready(c); deleting(c); c.Finalizers = nil }), contentNothing},
	}
	for _, tc := range cases {
		if got := decideContent(tc.c, drv); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestContentStatus(t *testing.T) {
	ts := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	cst := contentStatus(&csi.Snapshot{SnapshotId: "snap-1", SizeBytes: 1 << 30, ReadyToUse: true, CreationTime: timestamppb.New(ts)})
	if *cst.SnapshotHandle != "snap-1" || *cst.RestoreSize != 1<<30 || !*cst.ReadyToUse || *cst.CreationTime != ts.UnixNano() {
		t.Fatalf("content status %+v", cst)
	}
	p := createParams(map[string]string{"a": "1", "csi.storage.k8s.io/snapshotter-secret-name": "s", "CSI.storage.k8s.io/x": "y"})
	if len(p) != 1 || p["a"] != "1" {
		t.Fatalf("params %v", p)
	}
}
