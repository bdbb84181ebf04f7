package admission

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestMirrorPodRefused: a node creates only mirror pods bound to itself, owned by its
// Node alone, that name no other API object.
func TestMirrorPodRefused(t *testing.T) {
	mirror := func(change func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "static", Annotations: map[string]string{mirrorPodAnnotation: "hash"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "u", Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
		if change != nil {
			change(p)
		}
		return p
	}
	if err := mirrorPodRefused("n1", mirror(nil)); err != nil {
		t.Errorf("a mirror pod of n1 refused: %v", err)
	}
	for _, c := range []struct {
		want   string
		change func(*corev1.Pod)
	}{
		{"can only create mirror pods", func(p *corev1.Pod) { p.Annotations = nil }},
		{"spec.nodeName set to itself", func(p *corev1.Pod) { p.Spec.NodeName = "n2" }},
		{"an owner reference set to itself", func(p *corev1.Pod) { p.OwnerReferences = nil }},
		{"an owner reference set to itself", func(p *corev1.Pod) { p.OwnerReferences[0].Name = "n2" }},
		{"a single owner reference", func(p *corev1.Pod) { p.OwnerReferences = append(p.OwnerReferences, p.OwnerReferences[0]) }},
		{"a controller owner reference", func(p *corev1.Pod) { p.OwnerReferences[0].Controller = nil }},
		{"must not set blockOwnerDeletion", func(p *corev1.Pod) { p.OwnerReferences[0].BlockOwnerDeletion = ptr.To(true) }},
		{"reference a service account", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "default" }},
		{"reference secrets", func(p *corev1.Pod) { p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "s"}} }},
		{"reference secrets", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "E", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}}}
		}},
		{"reference configmaps", func(p *corev1.Pod) {
			p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{}}}
		}},
		{"reference configmaps", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{}}}}}}}
		}},
		{"reference persistentvolumeclaims", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}
		}},
		{"reference persistentvolumeclaims", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}}
		}},
	} {
		if err := mirrorPodRefused("n1", mirror(c.change)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error with %q, got %v", c.want, err)
		}
	}
}
