package client

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// The patch turns before into after when applied to before, and names before's
// resourceVersion, so that it conflicts with any later version.
func TestPatch(t *testing.T) {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", ResourceVersion: "7",
		Finalizers: []string{"kubernetes.io/pv-protection", "external-attacher/ebs-csi-aws-com"}}}
	noFin := pv.DeepCopy()
	noFin.Finalizers = []string{"kubernetes.io/pv-protection"}
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "csi-1", ResourceVersion: "9"},
		Status: storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"devicePath": "/dev/xvdaa"}}}
	detached := va.DeepCopy()
	detached.Status = storagev1.VolumeAttachmentStatus{}

	check := func(name string, before, after any, rv string) {
		t.Helper()
		patch, err := Patch(before.(metav1.Object), after.(metav1.Object))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var p struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(patch, &p); err != nil || p.Metadata.ResourceVersion != rv {
			t.Errorf("%s: patch %s: resourceVersion %q, want %q (%v)", name, patch, p.Metadata.ResourceVersion, rv, err)
		}
		orig, _ := json.Marshal(before)
		applied, err := strategicpatch.StrategicMergePatch(orig, patch, before)
		if err != nil {
			t.Fatalf("%s: apply %s: %v", name, patch, err)
		}
		got := reflect.New(reflect.TypeOf(before).Elem()).Interface()
		if err := json.Unmarshal(applied, got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, after) {
			t.Errorf("%s: patch %s gives %s", name, patch, applied)
		}
	}
	check("finalizer removed", pv, noFin, "7")
	check("status cleared", va, detached, "9")
	check("nothing changed", pv, pv.DeepCopy(), "7")
}
