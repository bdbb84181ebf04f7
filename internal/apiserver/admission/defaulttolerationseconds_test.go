package admission

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestAddDefaultTolerations(t *testing.T) {
	notReady300 := corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}
	unreachable300 := corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}
	own := corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](10)}
	cases := []struct {
		name string
		have []corev1.Toleration
		want []corev1.Toleration
	}{
		{"none", nil, []corev1.Toleration{notReady300, unreachable300}},
		{"own not-ready kept", []corev1.Toleration{own}, []corev1.Toleration{own, unreachable300}},
		{"tolerates everything", []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
		{"NoSchedule only does not cover", []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			[]corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}, notReady300, unreachable300}},
	}
	for _, tc := range cases {
		pod := &corev1.Pod{Spec: corev1.PodSpec{Tolerations: tc.have}}
		addDefaultTolerations(pod)
		if len(pod.Spec.Tolerations) != len(tc.want) {
			t.Errorf("%s: tolerations %v, want %v", tc.name, pod.Spec.Tolerations, tc.want)
			continue
		}
		for i := range tc.want {
			got, want := pod.Spec.Tolerations[i], tc.want[i]
			if got.Key != want.Key || got.Effect != want.Effect || got.Operator != want.Operator ||
				(got.TolerationSeconds == nil) != (want.TolerationSeconds == nil) ||
				(got.TolerationSeconds != nil && *got.TolerationSeconds != *want.TolerationSeconds) {
				t.Errorf("%s: toleration %d = %v, want %v", tc.name, i, got, want)
			}
		}
	}
}
