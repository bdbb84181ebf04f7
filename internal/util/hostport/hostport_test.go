package hostport

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestConflict(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b Port
		want bool
	}{
		{"same port, protocol and address", New("10.0.0.1", "TCP", 80), New("10.0.0.1", "TCP", 80), true},
		{"every address and one address", New("", "TCP", 80), New("10.0.0.1", "TCP", 80), true},
		{"0.0.0.0 and one address", New("10.0.0.1", "TCP", 80), New("0.0.0.0", "TCP", 80), true},
		{"both on every address", New("", "", 80), New("0.0.0.0", "tcp", 80), true},
		{"two addresses", New("127.0.0.1", "TCP", 80), New("10.0.0.1", "TCP", 80), false},
		{"another protocol", New("10.0.0.1", "TCP", 80), New("10.0.0.1", "UDP", 80), false},
		{"another protocol on every address", New("", "TCP", 80), New("", "UDP", 80), false},
		{"another port", New("", "TCP", 80), New("", "TCP", 81), false},
	} {
		if got := Conflict(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: Conflict(%v, %v) = %v", tc.name, tc.a, tc.b, got)
		}
		if got := Conflict(tc.b, tc.a); got != tc.want {
			t.Errorf("%s: Conflict(%v, %v) = %v (reversed)", tc.name, tc.b, tc.a, got)
		}
	}
}

func TestOfPod(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Name: "setup", Ports: []corev1.ContainerPort{{ContainerPort: 1, HostPort: 1000}}},
			{Name: "sidecar", RestartPolicy: &always, Ports: []corev1.ContainerPort{{ContainerPort: 2, HostPort: 2000, Protocol: corev1.ProtocolUDP}}},
		},
		Containers: []corev1.Container{{Name: "app", Ports: []corev1.ContainerPort{
			{ContainerPort: 8080},
			{ContainerPort: 8080, HostPort: 54323, HostIP: "0.0.0.0"},
			{ContainerPort: 8080, HostPort: 54323, HostIP: "127.0.0.1", Protocol: corev1.ProtocolTCP},
		}}},
	}}
	want := []Port{{"", corev1.ProtocolUDP, 2000}, {"", corev1.ProtocolTCP, 54323}, {"127.0.0.1", corev1.ProtocolTCP, 54323}}
	if got := OfPod(pod); !reflect.DeepEqual(got, want) {
		t.Errorf("OfPod = %v, want %v", got, want)
	}
	used := []Port{New("10.0.0.1", "UDP", 2000)}
	if got := Taken(want, used); !reflect.DeepEqual(got, want[:1]) {
		t.Errorf("Taken = %v", got)
	}
}
