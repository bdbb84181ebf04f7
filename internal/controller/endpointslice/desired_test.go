package endpointslice

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func svcWith(ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: ports}}
}

type podOpt func(*corev1.Pod)

func pod(name, ip string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: k8stypes.UID("uid-" + name)},
		Spec:   corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func notReady(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }
func terminating(p *corev1.Pod) {
	now := metav1.Now()
	p.DeletionTimestamp = &now
}
func httpOn(port int32) podOpt {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = port }
}

func TestDesiredGroups(t *testing.T) {
	svc := svcWith(corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromString("http")})
	pods := []*corev1.Pod{
		pod("b", "10.244.0.3"),
		pod("a", "10.244.0.2"),
		pod("slow", "10.244.0.4", notReady),
		pod("leaving", "10.244.0.5", terminating),
		pod("noip", ""),
		pod("done", "10.244.0.6", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		pod("other", "10.244.0.7", httpOn(9090)),
		pod("v6", "fd00::7"),
	}
	groups := desiredGroups(svc, pods, map[string]string{"node-a": "us-east-1a"})
	if len(groups) != 3 {
		t.Fatalf("%d groups, want 3 (8080/IPv4, 9090/IPv4, 8080/IPv6)", len(groups))
	}
	byKey := map[string]*group{}
	for _, g := range groups {
		byKey[g.key()] = g
	}
	main := byKey[groupKey(discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}})]
	if main == nil {
		t.Fatalf("no 8080 IPv4 group in %v", byKey)
	}
	type cond struct{ ready, serving, terminating bool }
	want := map[string]cond{"10.244.0.2": {true, true, false}, "10.244.0.3": {true, true, false}, "10.244.0.4": {false, false, false}, "10.244.0.5": {false, true, true}}
	if len(main.endpoints) != len(want) {
		t.Fatalf("endpoints %v", main.endpoints)
	}
	for i, ep := range main.endpoints {
		w, ok := want[ep.Addresses[0]]
		if !ok {
			t.Errorf("unexpected endpoint %s", ep.Addresses[0])
			continue
		}
		got := cond{*ep.Conditions.Ready, *ep.Conditions.Serving, *ep.Conditions.Terminating}
		if got != w {
			t.Errorf("%s conditions = %+v, want %+v", ep.Addresses[0], got, w)
		}
		if ptr.Deref(ep.Zone, "") != "us-east-1a" || ptr.Deref(ep.NodeName, "") != "node-a" || ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" {
			t.Errorf("%s: zone %v node %v targetRef %v", ep.Addresses[0], ep.Zone, ep.NodeName, ep.TargetRef)
		}
		if i > 0 && main.endpoints[i-1].Addresses[0] > ep.Addresses[0] {
			t.Error("endpoints not sorted")
		}
	}
	// publishNotReadyAddresses makes everyone ready.
	svc.Spec.PublishNotReadyAddresses = true
	for _, g := range desiredGroups(svc, pods, nil) {
		for _, ep := range g.endpoints {
			if !*ep.Conditions.Ready {
				t.Errorf("%s not ready with publishNotReadyAddresses", ep.Addresses[0])
			}
		}
	}
}

func TestChunk(t *testing.T) {
	eps := make([]discoveryv1.Endpoint, 250)
	got := chunk(eps, 100)
	if len(got) != 3 || len(got[0]) != 100 || len(got[2]) != 50 {
		t.Errorf("chunk(250, 100) sizes %d", len(got))
	}
	if chunk(nil, 100) != nil {
		t.Error("chunk of nothing is not empty")
	}
}
