package endpointutil

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func webPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.0.2"}}
}

func TestTargetPort(t *testing.T) {
	p := webPod()
	for _, tc := range []struct {
		sp   corev1.ServicePort
		want int32
		ok   bool
	}{
		{corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("http")}, 8080, true},
		{corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolUDP}, 0, false},
		{corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("grpc")}, 0, false},
		{corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(9000)}, 9000, true},
		{corev1.ServicePort{Port: 80}, 80, true},
	} {
		got, ok := TargetPort(p, &tc.sp)
		if got != tc.want || ok != tc.ok {
			t.Errorf("TargetPort(%v) = %d, %v; want %d, %v", tc.sp.TargetPort, got, ok, tc.want, tc.ok)
		}
	}
}

func TestPodServes(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*corev1.Pod)
		want bool
	}{
		{"running with an IP", func(*corev1.Pod) {}, true},
		{"no IP yet", func(p *corev1.Pod) { p.Status.PodIP = "" }, false},
		{"only podIPs", func(p *corev1.Pod) { p.Status.PodIP, p.Status.PodIPs = "", []corev1.PodIP{{IP: "fd00::2"}} }, true},
		{"succeeded", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, false},
		{"failed", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }, false},
	} {
		p := webPod()
		tc.edit(p)
		if got := PodServes(p); got != tc.want {
			t.Errorf("%s: PodServes = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestHostname(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}}
	p := webPod()
	p.Spec.Hostname, p.Spec.Subdomain = "db-0", "db"
	if got := Hostname(p, svc); got != "db-0" {
		t.Errorf("Hostname of a pod in the Service's subdomain = %q, want db-0", got)
	}
	p.Spec.Subdomain = "other"
	if got := Hostname(p, svc); got != "" {
		t.Errorf("Hostname of a pod in another subdomain = %q, want none", got)
	}
}
