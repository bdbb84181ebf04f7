package admission

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestResizeOnNode: a resize is refused only when the node could never run the pod at
// its new requests (its allocatable, not what its other pods leave), or is not Linux.
func TestResizeOnNode(t *testing.T) {
	node := func(os string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{}},
			Status: corev1.NodeStatus{Allocatable: rl("cpu", "2", "memory", "1Gi")}}
		if os != "" {
			n.Labels[corev1.LabelOSStable] = os
		}
		return n
	}
	pod := func(requests ...string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "a", Resources: corev1.ResourceRequirements{Requests: rl(requests...)}},
			{Name: "b", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "500m")}}}}}
	}
	for _, tc := range []struct {
		name      string
		pod       *corev1.Pod
		node      *corev1.Node
		cause     metav1.CauseType
		wantError string
	}{
		{"fits", pod("cpu", "1500m", "memory", "1Gi"), node("linux"), "", ""},
		{"node without an os label", pod("cpu", "1"), node(""), "", ""},
		{"cpu beyond allocatable", pod("cpu", "1501m"), node("linux"), causeNodeCapacity,
			"node didn't have enough allocatable resources: cpu, requested: 2001, allocatable: 2000"},
		{"both beyond allocatable", pod("cpu", "2", "memory", "2Gi"), node("linux"), causeNodeCapacity,
			"node didn't have enough allocatable resources: cpu, requested: 2500, allocatable: 2000; memory, requested: 2147483648, allocatable: 1073741824"},
		{"windows node", pod("cpu", "1"), node("windows"), causeUnsupportedPlatform,
			`pod resize is only supported on linux nodes, node "n1" is "windows"`},
	} {
		cause, err := resizeOnNode(tc.pod, tc.node)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if cause != tc.cause || got != tc.wantError {
			t.Errorf("%s: %q %q, want %q %q", tc.name, cause, got, tc.cause, tc.wantError)
		}
	}
}
