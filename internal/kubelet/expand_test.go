package kubelet

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeExpansion(t *testing.T) {
	storage := func(q string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(q)}
	}
	pv := func(size string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{Capacity: storage(size)}}
	}
	claim := func(capacity string, pending bool, nodeResize bool) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{Capacity: storage(capacity)}}
		if pending {
			c.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionTrue}}
		}
		if nodeResize {
			c.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{corev1.ResourceStorage: corev1.PersistentVolumeClaimNodeResizePending}
		}
		return c
	}
	for _, tc := range []struct {
		name  string
		claim *corev1.PersistentVolumeClaim
		pv    *corev1.PersistentVolume
		want  string // "" when no expansion is due
	}{
		{"nothing asked", claim("1Gi", false, false), pv("2Gi"), ""},
		{"FileSystemResizePending", claim("1Gi", true, false), pv("2Gi"), "2Gi"},
		{"NodeResizePending", claim("1Gi", false, true), pv("5Gi"), "5Gi"},
		{"asked, but the PV has not grown yet", claim("1Gi", true, true), pv("1Gi"), ""},
		{"asked, and the claim has the size already", claim("2Gi", true, false), pv("2Gi"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			size, ok := nodeExpansion(tc.claim, tc.pv)
			got := ""
			if ok {
				got = size.String()
			}
			if got != tc.want {
				t.Errorf("nodeExpansion = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestResizeFinished(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: "42"},
		Status: corev1.PersistentVolumeClaimStatus{
			Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			Conditions: []corev1.PersistentVolumeClaimCondition{
				{Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionTrue},
				{Type: "SomethingElse", Status: corev1.ConditionTrue},
			},
			AllocatedResourceStatuses: map[corev1.ResourceName]corev1.ClaimResourceStatus{corev1.ResourceStorage: corev1.PersistentVolumeClaimNodeResizePending},
		},
	}
	raw, err := resizeFinished(pvc, resource.MustParse("2Gi"))
	if err != nil {
		t.Fatal(err)
	}
	var patch struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Status struct {
			Capacity                  map[string]string `json:"capacity"`
			Conditions                []corev1.PersistentVolumeClaimCondition
			AllocatedResourceStatuses map[string]*string `json:"allocatedResourceStatuses"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &patch); err != nil {
		t.Fatal(err)
	}
	if patch.Metadata.ResourceVersion != "42" {
		t.Errorf("patch precondition resourceVersion %q, want 42", patch.Metadata.ResourceVersion)
	}
	if patch.Status.Capacity["storage"] != "2Gi" {
		t.Errorf("capacity %v, want storage 2Gi", patch.Status.Capacity)
	}
	if len(patch.Status.Conditions) != 1 || patch.Status.Conditions[0].Type != "SomethingElse" {
		t.Errorf("conditions %v, want only the unrelated one kept", patch.Status.Conditions)
	}
	if v, ok := patch.Status.AllocatedResourceStatuses["storage"]; !ok || v != nil {
		t.Errorf("allocatedResourceStatuses %v, want storage deleted (null)", patch.Status.AllocatedResourceStatuses)
	}
}
