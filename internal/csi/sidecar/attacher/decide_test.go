package attacher

import (
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const drv = "ebs.csi.aws.com"

func TestFinalizer(t *testing.T) {
	if got := Finalizer(drv); got != "external-attacher/ebs-csi-aws-com" {
		t.Fatalf("got %s", got)
	}
	if got := Finalizer("my_driver.io/x"); got != "external-attacher/my-driver-io-x" {
		t.Fatalf("got %s", got)
	}
}

func TestDecideAttachment(t *testing.T) {
	now := metav1.Now()
	mk := func(attacher string, attached, fin, deleting bool) *storagev1.VolumeAttachment {
		va := &storagev1.VolumeAttachment{Spec: storagev1.VolumeAttachmentSpec{Attacher: attacher}, Status: storagev1.VolumeAttachmentStatus{Attached: attached}}
		if fin {
			va.Finalizers = []string{Finalizer(drv)}
		}
		if deleting {
			va.DeletionTimestamp = &now
		}
		return va
	}
	cases := []struct {
		name string
		va   *storagev1.VolumeAttachment
		want step
	}{
		{"new attachment", mk(drv, false, false, false), stepAttach},
		{"finalizer added, not attached yet", mk(drv, false, true, false), stepAttach},
		{"attached", mk(drv, true, true, false), stepNothing},
		{"attached by an older attacher without finalizer", mk(drv, true, false, false), stepAttach},
		{"deleted", mk(drv, true, true, true), stepDetach},
		{"deleted, finalizer gone", mk(drv, false, false, true), stepNothing},
		{"another driver's", mk("other.csi", false, false, false), stepNothing},
	}
	for _, tc := range cases {
		if got := decideAttachment(tc.va, drv); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestDecideVolume(t *testing.T) {
	now := metav1.Now()
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Finalizers: []string{Finalizer(drv)}}}
	if decideVolume(pv, drv, 0) {
		t.Error("finalizer removed from a PV that is not being deleted")
	}
	pv.DeletionTimestamp = &now
	if decideVolume(pv, drv, 1) {
		t.Error("finalizer removed while an attachment names the PV")
	}
	if !decideVolume(pv, drv, 0) {
		t.Error("finalizer kept on a deleted PV without attachments")
	}
}

func TestNodeID(t *testing.T) {
	cn := &storagev1.CSINode{Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "x"}, {Name: drv, NodeID: "i-0abc"}}}}
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnNodeID: "i-0def"}}}
	if id, err := nodeID(drv, "n", cn, va); err != nil || id != "i-0abc" {
		t.Fatalf("from CSINode: %q %v", id, err)
	}
	if id, err := nodeID(drv, "n", &storagev1.CSINode{}, va); err != nil || id != "i-0def" {
		t.Fatalf("from the attachment's annotation: %q %v", id, err)
	}
	if _, err := nodeID(drv, "n", nil, nil); err == nil || !strings.Contains(err.Error(), `node "n" has no id`) {
		t.Fatalf("missing id: %v", err)
	}
	if _, err := nodeID(drv, "n", &storagev1.CSINode{}, &storagev1.VolumeAttachment{}); err == nil {
		t.Fatal("an attachment without the annotation gave an id")
	}
}

func TestPublishRequest(t *testing.T) {
	block := corev1.PersistentVolumeBlock
	pv := func(modes []corev1.PersistentVolumeAccessMode, mode *corev1.PersistentVolumeMode, ro bool) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Spec: corev1.PersistentVolumeSpec{
			AccessModes: modes, VolumeMode: mode, MountOptions: []string{"noatime"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: drv, VolumeHandle: "vol-1", FSType: "xfs", ReadOnly: ro, VolumeAttributes: map[string]string{"k": "v"}}}}}
	}
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	cases := []struct {
		name     string
		pv       *corev1.PersistentVolume
		mode     csi.VolumeCapability_AccessMode_Mode
		block    bool
		readOnly bool
	}{
		{"rwo filesystem", pv(rwo, nil, false), csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, false, false},
		{"rwo block", pv(rwo, &block, false), csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, true, false},
		{"read-only source", pv(rwo, nil, true), csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, false, true},
		{"rox only is read-only", pv([]corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany}, nil, false), csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY, false, true},
		{"rwx wins", pv([]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteMany}, nil, false), csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, false, false},
	}
	for _, tc := range cases {
		req, err := publishRequest(tc.pv, "i-1")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		c := req.VolumeCapability
		if req.VolumeId != "vol-1" || req.NodeId != "i-1" || req.VolumeContext["k"] != "v" || req.Readonly != tc.readOnly ||
			c.AccessMode.Mode != tc.mode || (c.GetBlock() != nil) != tc.block {
			t.Errorf("%s: %v", tc.name, req)
		}
		if m := c.GetMount(); m != nil && (m.FsType != "xfs" || m.MountFlags[0] != "noatime") {
			t.Errorf("%s: mount %v", tc.name, m)
		}
	}
	if _, err := publishRequest(&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "nfs"}}, "i-1"); err == nil {
		t.Error("non-CSI PV accepted")
	}
}
