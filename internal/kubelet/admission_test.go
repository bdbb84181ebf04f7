package kubelet

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubelab/kubelab/internal/util/hostport"
)

func TestAdmitHostPorts(t *testing.T) {
	used := []hostport.Port{hostport.New("127.0.0.1", "TCP", 54323), hostport.New("", "UDP", 53)}
	for _, tc := range []struct {
		want []hostport.Port
		ok   bool
	}{
		{nil, true},
		{[]hostport.Port{hostport.New("172.31.0.10", "TCP", 54323)}, true},
		{[]hostport.Port{hostport.New("172.31.0.10", "UDP", 54323)}, true},
		{[]hostport.Port{hostport.New("0.0.0.0", "TCP", 54323)}, false},
		{[]hostport.Port{hostport.New("172.31.0.10", "UDP", 53)}, false},
	} {
		ok, reason, message := admitHostPorts(tc.want, used)
		if ok != tc.ok || !ok && (reason != "NodePorts" || message != "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports") {
			t.Errorf("%v: %v %q %q, want ok %v", tc.want, ok, reason, message, tc.ok)
		}
	}
}

// A pod whose status shows it ran was admitted before the kubelet started.
func TestRanHere(t *testing.T) {
	for _, tc := range []struct {
		status corev1.PodStatus
		want   bool
	}{
		{corev1.PodStatus{}, false},
		{corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "a"}}}, false},
		{corev1.PodStatus{Phase: corev1.PodRunning}, true},
		{corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{Name: "i", ContainerID: "containerd://1"}}}, true},
	} {
		if got := ranHere(&corev1.Pod{Status: tc.status}); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.status, got, tc.want)
		}
	}
}
