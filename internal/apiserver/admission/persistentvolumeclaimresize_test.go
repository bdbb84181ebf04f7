package admission

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestResizeDecision(t *testing.T) {
	claim := func(class string, size string, phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{
			Spec:   corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(class), Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", size)}},
			Status: corev1.PersistentVolumeClaimStatus{Phase: phase},
		}
	}
	sc := func(name string, expand *bool) *storagev1.StorageClass {
		return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, AllowVolumeExpansion: expand}
	}
	cases := []struct {
		name     string
		old, new *corev1.PersistentVolumeClaim
		class    *storagev1.StorageClass
		want     error
	}{
		{"expandable class", claim("gp3", "1Gi", corev1.ClaimBound), claim("gp3", "2Gi", corev1.ClaimBound), sc("gp3", ptr.To(true)), nil},
		{"class without expansion", claim("gp3", "1Gi", corev1.ClaimBound), claim("gp3", "2Gi", corev1.ClaimBound), sc("gp3", nil), errResizeForbidden},
		{"class forbids expansion", claim("gp3", "1Gi", corev1.ClaimBound), claim("gp3", "2Gi", corev1.ClaimBound), sc("gp3", ptr.To(false)), errResizeForbidden},
		{"no class", claim("", "1Gi", corev1.ClaimBound), claim("", "2Gi", corev1.ClaimBound), nil, errResizeForbidden},
		{"missing class", claim("gp3", "1Gi", corev1.ClaimBound), claim("gp3", "2Gi", corev1.ClaimBound), nil, errResizeForbidden},
		{"unbound claim", claim("gp3", "1Gi", corev1.ClaimPending), claim("gp3", "2Gi", corev1.ClaimPending), sc("gp3", ptr.To(true)), errResizeUnbound},
	}
	for _, tc := range cases {
		if !growsStorage(tc.new, tc.old) {
			t.Fatalf("%s: not a growth", tc.name)
		}
		if got := resizeDecision(tc.new, tc.old, tc.class); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if growsStorage(claim("gp3", "1Gi", corev1.ClaimBound), claim("gp3", "1Gi", corev1.ClaimBound)) {
		t.Error("an unchanged size counted as growth")
	}
}
