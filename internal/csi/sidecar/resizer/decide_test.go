package resizer

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const drv = "ebs.csi.aws.com"

func claimOf(req string, mut ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv",
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(req)}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}
	for _, m := range mut {
		m(c)
	}
	return c
}

func pvOf(size, driver string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Spec: corev1.PersistentVolumeSpec{
		Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "vol-1"}}}}
}

func TestDecideResize(t *testing.T) {
	infeasible := func(size string) func(*corev1.PersistentVolumeClaim) {
		return func(c *corev1.PersistentVolumeClaim) {
			setAllocated(c, resource.MustParse(size), corev1.PersistentVolumeClaimControllerResizeInfeasible)
		}
	}
	cases := []struct {
		name  string
		claim *corev1.PersistentVolumeClaim
		pv    *corev1.PersistentVolume
		want  bool
	}{
		{"larger request", claimOf("3Gi"), pvOf("1Gi", drv), true},
		{"same size", claimOf("1Gi"), pvOf("1Gi", drv), false},
		{"PV already grown (node step pending)", claimOf("3Gi"), pvOf("3Gi", drv), false},
		{"smaller request", claimOf("1Gi"), pvOf("2Gi", drv), false},
		{"other driver", claimOf("3Gi"), pvOf("1Gi", "other"), false},
		{"not bound", claimOf("3Gi", func(c *corev1.PersistentVolumeClaim) { c.Status.Phase = corev1.ClaimPending }), pvOf("1Gi", drv), false},
		{"same request refused before", claimOf("3Gi", infeasible("3Gi")), pvOf("1Gi", drv), false},
		{"new request after a refusal", claimOf("2Gi", infeasible("3Gi")), pvOf("1Gi", drv), true},
	}
	for _, tc := range cases {
		if got := decideResize(tc.claim, tc.pv, drv); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func condTypes(c *corev1.PersistentVolumeClaim) []corev1.PersistentVolumeClaimConditionType {
	var out []corev1.PersistentVolumeClaimConditionType
	for _, x := range c.Status.Conditions {
		out = append(out, x.Type)
	}
	return out
}

func TestStatuses(t *testing.T) {
	now := time.Now()
	three := resource.MustParse("3Gi")
	c := claimOf("3Gi")
	r := resizingStatus(c, three, now)
	if got := condTypes(r); len(got) != 1 || got[0] != corev1.PersistentVolumeClaimResizing {
		t.Fatalf("resizing conditions %v", got)
	}
	if r.Status.AllocatedResourceStatuses[corev1.ResourceStorage] != corev1.PersistentVolumeClaimControllerResizeInProgress || c.Status.AllocatedResources != nil {
		t.Fatalf("resizing status %+v (input must stay untouched)", r.Status)
	}

	node := resizedStatus(r, three, true, now)
	if got := condTypes(node); len(got) != 1 || got[0] != corev1.PersistentVolumeClaimFileSystemResizePending || node.Status.Conditions[0].Message != messageFSResizePending {
		t.Fatalf("node-pending conditions %+v", node.Status.Conditions)
	}
	if node.Status.AllocatedResourceStatuses[corev1.ResourceStorage] != corev1.PersistentVolumeClaimNodeResizePending || node.Status.Capacity.Storage().String() != "1Gi" {
		t.Fatalf("node-pending status %+v", node.Status)
	}

	done := resizedStatus(r, three, false, now)
	if len(done.Status.Conditions) != 0 || done.Status.AllocatedResourceStatuses != nil || done.Status.Capacity.Storage().String() != "3Gi" {
		t.Fatalf("done status %+v", done.Status)
	}

	refused := failedStatus(r, three, true, "too big", now)
	if got := condTypes(refused); len(got) != 1 || got[0] != ConditionControllerResizeError || refused.Status.Conditions[0].Message != "too big" {
		t.Fatalf("refused conditions %+v", refused.Status.Conditions)
	}
	if refused.Status.AllocatedResourceStatuses[corev1.ResourceStorage] != corev1.PersistentVolumeClaimControllerResizeInfeasible {
		t.Fatalf("refused status %+v", refused.Status)
	}
	retry := failedStatus(r, three, false, "busy", now)
	if got := condTypes(retry); len(got) != 1 || got[0] != corev1.PersistentVolumeClaimResizing {
		t.Fatalf("retry conditions %v", got)
	}
	// A new attempt clears an earlier refusal.
	again := resizingStatus(refused, three, now)
	if got := condTypes(again); len(got) != 1 || got[0] != corev1.PersistentVolumeClaimResizing {
		t.Fatalf("new attempt conditions %v", got)
	}
}
