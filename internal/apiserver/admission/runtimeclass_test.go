package admission

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestApplyRuntimeClass(t *testing.T) {
	overhead := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("1Mi")}
	withOverhead := &nodev1.RuntimeClass{Handler: "runc", Overhead: &nodev1.Overhead{PodFixed: overhead}}
	scheduling := &nodev1.RuntimeClass{Handler: "runc", Scheduling: &nodev1.Scheduling{
		NodeSelector: map[string]string{"sandbox": "gvisor"},
		Tolerations:  []corev1.Toleration{{Key: "sandbox", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
	}}
	for _, tc := range []struct {
		name     string
		class    *nodev1.RuntimeClass
		pod      corev1.PodSpec
		want     corev1.PodSpec
		err      string
		validErr string
	}{
		{name: "no class", pod: corev1.PodSpec{}, want: corev1.PodSpec{}},
		{name: "class without overhead", class: &nodev1.RuntimeClass{Handler: "runc"}, want: corev1.PodSpec{}},
		{name: "overhead set", class: withOverhead, want: corev1.PodSpec{Overhead: overhead}},
		{name: "same overhead stated", class: withOverhead, pod: corev1.PodSpec{Overhead: overhead}, want: corev1.PodSpec{Overhead: overhead}},
		{name: "other overhead stated", class: withOverhead, pod: corev1.PodSpec{Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
			err: "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"},
		{name: "overhead without a class's", pod: corev1.PodSpec{Overhead: overhead}, want: corev1.PodSpec{Overhead: overhead},
			validErr: "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"},
		{name: "scheduling merged", class: scheduling,
			pod: corev1.PodSpec{NodeSelector: map[string]string{"zone": "a"},
				Tolerations: []corev1.Toleration{{Key: "sandbox", Operator: corev1.TolerationOpEqual, Value: "x", Effect: corev1.TaintEffectNoSchedule}}},
			want: corev1.PodSpec{NodeSelector: map[string]string{"zone": "a", "sandbox": "gvisor"},
				Tolerations: []corev1.Toleration{{Key: "sandbox", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}},
		{name: "scheduling without a pod selector", class: scheduling,
			want: corev1.PodSpec{NodeSelector: map[string]string{"sandbox": "gvisor"},
				Tolerations: []corev1.Toleration{{Key: "sandbox", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}},
		{name: "selector conflict", class: scheduling, pod: corev1.PodSpec{NodeSelector: map[string]string{"sandbox": "kata"}},
			err: "conflict: runtimeClass.scheduling.nodeSelector[sandbox] = gvisor; pod.spec.nodeSelector[sandbox] = kata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: tc.pod}
			err := applyRuntimeClass(pod, tc.class)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(pod.Spec, tc.want) {
				t.Errorf("spec %+v, want %+v", pod.Spec, tc.want)
			}
			err = checkOverhead(pod, tc.class)
			if got := ""; err != nil {
				got = err.Error()
				if got != tc.validErr {
					t.Errorf("validation: %q, want %q", got, tc.validErr)
				}
			} else if tc.validErr != "" {
				t.Errorf("validation passed, want %q", tc.validErr)
			}
		})
	}
}

func TestMergeTolerations(t *testing.T) {
	noExec := func(key string, secs *int64) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: secs}
	}
	equal := corev1.Toleration{Key: "k", Operator: corev1.TolerationOpEqual, Value: "v", Effect: corev1.TaintEffectNoSchedule}
	anyEffect := corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists}
	everything := corev1.Toleration{Operator: corev1.TolerationOpExists}
	for _, tc := range []struct {
		name       string
		pod, class []corev1.Toleration
		want       []corev1.Toleration
	}{
		{"disjoint", []corev1.Toleration{equal}, []corev1.Toleration{noExec("other", nil)}, []corev1.Toleration{equal, noExec("other", nil)}},
		{"duplicate kept once", []corev1.Toleration{equal}, []corev1.Toleration{equal}, []corev1.Toleration{equal}},
		{"class covers the pod's", []corev1.Toleration{equal}, []corev1.Toleration{anyEffect}, []corev1.Toleration{anyEffect}},
		{"pod's covers the class's", []corev1.Toleration{everything}, []corev1.Toleration{equal, noExec("x", nil)}, []corev1.Toleration{everything}},
		{"longer tolerationSeconds covers shorter", []corev1.Toleration{noExec("n", ptr.To[int64](60))}, []corev1.Toleration{noExec("n", ptr.To[int64](300))},
			[]corev1.Toleration{noExec("n", ptr.To[int64](300))}},
		{"forever covers a limit", []corev1.Toleration{noExec("n", nil)}, []corev1.Toleration{noExec("n", ptr.To[int64](300))},
			[]corev1.Toleration{noExec("n", nil)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mergeTolerations(tc.pod, tc.class); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("merged %+v, want %+v", got, tc.want)
			}
		})
	}
}
