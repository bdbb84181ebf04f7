package apiserver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// An image volume's pullPolicy defaults as a container's imagePullPolicy does; its
// reference is required and its policy one of the three.
func TestImageVolumeSource(t *testing.T) {
	for ref, want := range map[string]corev1.PullPolicy{
		"kitten:1.8": corev1.PullIfNotPresent, "kitten:latest": corev1.PullAlways, "kitten": corev1.PullAlways,
		"registry.local:5000/kitten": corev1.PullAlways, "kitten@sha256:0123": corev1.PullIfNotPresent,
	} {
		v := corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: ref}}
		defaultVolumeSource(&v)
		if v.Image.PullPolicy != want {
			t.Errorf("default pullPolicy of %q = %q, want %q", ref, v.Image.PullPolicy, want)
		}
	}
	kept := corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "kitten", PullPolicy: corev1.PullNever}}
	if defaultVolumeSource(&kept); kept.Image.PullPolicy != corev1.PullNever {
		t.Errorf("a set pullPolicy became %q", kept.Image.PullPolicy)
	}
	p := field.NewPath("spec", "volumes").Index(0)
	sameFields(t, "valid", validateVolumeSource(&corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "kitten", PullPolicy: corev1.PullAlways}}, p), nil)
	sameFields(t, "no reference, bad policy", validateVolumeSource(&corev1.VolumeSource{Image: &corev1.ImageVolumeSource{PullPolicy: "Sometimes"}}, p),
		[]string{"FieldValueRequired spec.volumes[0].image.reference", "FieldValueNotSupported spec.volumes[0].image.pullPolicy"})
}
