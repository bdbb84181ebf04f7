package apiserver

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// A podCertificate source's lifetime is bounded: at least an hour, at most 91 days (a
// day for kubernetes.io signers); it needs a key type and a file to write.
func TestValidatePodCertificateProjection(t *testing.T) {
	src := func(f func(pc *corev1.PodCertificateProjection)) *corev1.ProjectedVolumeSource {
		pc := &corev1.PodCertificateProjection{SignerName: "example.com/spiffe", KeyType: "ECDSAP256", CredentialBundlePath: "creds.pem"}
		f(pc)
		return &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{PodCertificate: pc}}}
	}
	for _, tc := range []struct {
		name string
		f    func(pc *corev1.PodCertificateProjection)
		want string
	}{
		{"valid", func(*corev1.PodCertificateProjection) {}, ""},
		{"too long", func(pc *corev1.PodCertificateProjection) { pc.MaxExpirationSeconds = ptr.To[int32](91*24*3600 + 1) },
			"if provided, maxExpirationSeconds must be <= 7862400"},
		{"too short", func(pc *corev1.PodCertificateProjection) { pc.MaxExpirationSeconds = ptr.To[int32](3599) },
			"if provided, maxExpirationSeconds must be >= 3600"},
		{"a day for kubernetes.io", func(pc *corev1.PodCertificateProjection) {
			pc.SignerName, pc.MaxExpirationSeconds = "kubernetes.io/x", ptr.To[int32](86401)
		}, "if provided, maxExpirationSeconds must be <= 86400"},
		{"key type", func(pc *corev1.PodCertificateProjection) { pc.KeyType = "DSA" }, "spec.volumes[0].projected.sources[0].podCertificate.keyType: Unsupported value"},
		{"no path", func(pc *corev1.PodCertificateProjection) { pc.CredentialBundlePath = "" },
			"specify at least one of credentialBundlePath, keyPath, and certificateChainPath"},
	} {
		errs := validateProjectedSources(src(tc.f), field.NewPath("spec", "volumes").Index(0).Child("projected"))
		got := errs.ToAggregate()
		switch {
		case tc.want == "" && got != nil:
			t.Errorf("%s: %v", tc.name, got)
		case tc.want != "" && (got == nil || !strings.Contains(got.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, got, tc.want)
		}
	}
}
