package snapshot

import (
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/util/snapshotutil"
)

const drv = "ebs.csi.aws.com"

func class(name, driver string, def bool) *snapv1.VolumeSnapshotClass {
	c := &snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Driver: driver}
	if def {
		c.Annotations = map[string]string{snapshotutil.AnnDefaultClass: "true"}
	}
	return c
}

func TestPickClass(t *testing.T) {
	named := &snapv1.VolumeSnapshot{Spec: snapv1.VolumeSnapshotSpec{VolumeSnapshotClassName: ptr.To("b")}}
	unnamed := &snapv1.VolumeSnapshot{}
	cases := []struct {
		name    string
		vs      *snapv1.VolumeSnapshot
		classes []*snapv1.VolumeSnapshotClass
		want    string
		err     string
	}{
		{"named", named, []*snapv1.VolumeSnapshotClass{class("a", drv, true), class("b", drv, false)}, "b", ""},
		{"named missing", named, []*snapv1.VolumeSnapshotClass{class("a", drv, true)}, "", `"b" not found`},
		{"the driver's default", unnamed, []*snapv1.VolumeSnapshotClass{class("x", "other", true), class("a", drv, true)}, "a", ""},
		{"no default", unnamed, []*snapv1.VolumeSnapshotClass{class("a", drv, false)}, "", "cannot find default"},
		{"two defaults", unnamed, []*snapv1.VolumeSnapshotClass{class("a", drv, true), class("b", drv, true)}, "", "2 default"},
	}
	for _, tc := range cases {
		c, err := pickClass(tc.vs, tc.classes, drv)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.err)
		case tc.err == "" && (err != nil || c.Name != tc.want):
			t.Errorf("%s: got %v %v, want %s", tc.name, c, err, tc.want)
		}
	}
}

func TestSnapshotStatus(t *testing.T) {
	ts := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	cst := &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: ptr.To("snap-1"), RestoreSize: ptr.To[int64](1 << 30),
		ReadyToUse: ptr.To(true), CreationTime: ptr.To(ts.UnixNano())}
	content := &snapv1.VolumeSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: "snapcontent-1"}, Status: cst}
	st := snapshotStatus(content)
	if *st.BoundVolumeSnapshotContentName != "snapcontent-1" || !*st.ReadyToUse || st.RestoreSize.String() != "1Gi" || !st.CreationTime.Time.Equal(ts) {
		t.Fatalf("snapshot status %+v", st)
	}
	if !sameStatus(st, snapshotStatus(content)) || sameStatus(st, snapshotStatus(&snapv1.VolumeSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: "snapcontent-1"}})) {
		t.Fatal("sameStatus")
	}
}
