package admission

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/utils/ptr"
)

func TestResolvePriority(t *testing.T) {
	cases := []struct {
		name     string
		class    string
		priority *int32
		policy   *corev1.PreemptionPolicy
		want     int32
		err      string
	}{
		{name: "no class", want: 0},
		{name: "node critical", class: "system-node-critical", want: 2000001000},
		{name: "cluster critical", class: "system-cluster-critical", want: 2000000000},
		{name: "matching priority stated", class: "system-cluster-critical", priority: ptr.To[int32](2000000000), want: 2000000000},
		{name: "unknown class", class: "gold", err: "no PriorityClass with name gold was found"},
		{name: "own priority", priority: ptr.To[int32](7),
			err: "the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 0 from the given PriorityClass name"},
		{name: "own preemption policy", policy: ptr.To(corev1.PreemptNever),
			err: "the string value of PreemptionPolicy (Never) must not be provided in pod spec; priority admission controller computed PreemptLowerPriority from the given PriorityClass name"},
	}
	for _, tc := range cases {
		pod := &corev1.Pod{Spec: corev1.PodSpec{PriorityClassName: tc.class, Priority: tc.priority, PreemptionPolicy: tc.policy}}
		err := resolvePriority(pod)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if pod.Spec.Priority == nil || *pod.Spec.Priority != tc.want {
			t.Errorf("%s: priority %v, want %d", tc.name, pod.Spec.Priority, tc.want)
		}
		if pod.Spec.PreemptionPolicy == nil || *pod.Spec.PreemptionPolicy != corev1.PreemptLowerPriority {
			t.Errorf("%s: preemption policy %v, want PreemptLowerPriority", tc.name, pod.Spec.PreemptionPolicy)
		}
	}
}

// An update that leaves the priority out keeps the one given at creation; a refused
// create is forbidden.
func TestPriorityPlugin(t *testing.T) {
	p := newPriority()
	old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{Priority: ptr.To[int32](2000000000), PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority)}}
	pod := &corev1.Pod{ObjectMeta: old.ObjectMeta}
	update := admission.NewAttributesRecord(pod, old, corev1.SchemeGroupVersion.WithKind("Pod"), "ns", "p",
		corev1.SchemeGroupVersion.WithResource("pods"), "", admission.Update, &metav1.UpdateOptions{}, false, nil)
	if err := p.Admit(context.Background(), update, nil); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.Priority == nil || *pod.Spec.Priority != 2000000000 || pod.Spec.PreemptionPolicy == nil {
		t.Errorf("update lost the priority: %v %v", pod.Spec.Priority, pod.Spec.PreemptionPolicy)
	}
	bad := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"}, Spec: corev1.PodSpec{PriorityClassName: "gold"}}
	err := p.Admit(context.Background(), createAttrs(bad, "ns", "q", corev1.SchemeGroupVersion.WithKind("Pod"), "pods"), nil)
	if err == nil || err.Error() != `pods "q" is forbidden: no PriorityClass with name gold was found` {
		t.Errorf("unknown class: %v", err)
	}
}
