package admission

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStorageObjectInUseProtection(t *testing.T) {
	p := newStorageObjectInUseProtection()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", Finalizers: []string{"other"}}}
	if err := p.Admit(context.Background(), createAttrs(pvc, "ns", "c", corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"), "persistentvolumeclaims"), nil); err != nil {
		t.Fatal(err)
	}
	if want := []string{"other", "kubernetes.io/pvc-protection"}; !slices.Equal(pvc.Finalizers, want) {
		t.Errorf("claim finalizers %v, want %v", pvc.Finalizers, want)
	}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "v", Finalizers: []string{"kubernetes.io/pv-protection"}}}
	if err := p.Admit(context.Background(), createAttrs(pv, "", "v", corev1.SchemeGroupVersion.WithKind("PersistentVolume"), "persistentvolumes"), nil); err != nil {
		t.Fatal(err)
	}
	if want := []string{"kubernetes.io/pv-protection"}; !slices.Equal(pv.Finalizers, want) {
		t.Errorf("volume finalizers %v, want %v (no duplicate)", pv.Finalizers, want)
	}
}
