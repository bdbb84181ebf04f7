package endpoint

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func svcWith(ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, ClusterIP: "10.96.0.20", Ports: ports}}
}

type podOpt func(*corev1.Pod)

func pod(name, ip string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: k8stypes.UID("uid-" + name), Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
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

// ips lists the addresses of subsets as "ready:..." and "notReady:..." per subset.
func ips(subsets []corev1.EndpointSubset) []string {
	var out []string
	for _, s := range subsets {
		var r, n []string
		for _, a := range s.Addresses {
			r = append(r, a.IP)
		}
		for _, a := range s.NotReadyAddresses {
			n = append(n, a.IP)
		}
		var ports []string
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s/%d", p.Name, p.Port))
		}
		out = append(out, fmt.Sprintf("%v ready%v notReady%v", ports, r, n))
	}
	return out
}

func TestDesiredSubsets(t *testing.T) {
	http := corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}
	pods := []*corev1.Pod{pod("b", "10.244.0.3"), pod("a", "10.244.0.2"), pod("slow", "10.244.0.4", notReady),
		pod("leaving", "10.244.0.5", terminating), pod("noip", ""), pod("other", "10.244.0.7", httpOn(9090)),
		pod("done", "10.244.0.6", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })}
	for _, tc := range []struct {
		name string
		svc  func(*corev1.Service)
		want []string
	}{
		{"ready, not ready, terminating left out", func(*corev1.Service) {}, []string{
			"[http/8080] ready[10.244.0.2 10.244.0.3] notReady[10.244.0.4]",
			"[http/9090] ready[10.244.0.7] notReady[]"}},
		{"publishNotReadyAddresses", func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true }, []string{
			"[http/8080] ready[10.244.0.2 10.244.0.3 10.244.0.4 10.244.0.5] notReady[]",
			"[http/9090] ready[10.244.0.7] notReady[]"}},
		{"no ports, not headless", func(s *corev1.Service) { s.Spec.Ports = nil }, nil},
		{"no ports, headless", func(s *corev1.Service) { s.Spec.Ports, s.Spec.ClusterIP = nil, corev1.ClusterIPNone }, []string{
			"[] ready[10.244.0.2 10.244.0.3 10.244.0.7] notReady[10.244.0.4]"}},
		{"a named port no pod has", func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("grpc") }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := svcWith(http)
			tc.svc(svc)
			if got := ips(desiredSubsets(svc, pods)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("subsets\n got %v\nwant %v", got, tc.want)
			}
		})
	}
	subs := desiredSubsets(svcWith(http), []*corev1.Pod{pod("a", "10.244.0.2", func(p *corev1.Pod) {
		p.Spec.Hostname, p.Spec.Subdomain = "a", "web"
	})})
	a := subs[0].Addresses[0]
	if a.Hostname != "a" || a.NodeName == nil || *a.NodeName != "node-a" || a.TargetRef == nil || a.TargetRef.Name != "a" || a.TargetRef.UID != "uid-a" {
		t.Errorf("address %+v", a)
	}
	if p := subs[0].Ports[0]; p.Protocol != corev1.ProtocolTCP || p.Port != 8080 || p.Name != "http" {
		t.Errorf("port %+v", p)
	}
}

func addrs(n int, prefix string) []corev1.EndpointAddress {
	out := make([]corev1.EndpointAddress, n)
	for i := range out {
		out[i].IP = fmt.Sprintf("%s.%d.%d", prefix, i/250, i%250)
	}
	return out
}

func TestTruncate(t *testing.T) {
	count := func(subs []corev1.EndpointSubset) (ready, notReady []int) {
		for _, s := range subs {
			ready, notReady = append(ready, len(s.Addresses)), append(notReady, len(s.NotReadyAddresses))
		}
		return
	}
	for _, tc := range []struct {
		name                  string
		subsets               []corev1.EndpointSubset
		wantOver              bool
		wantReady, wantNotRdy []int
	}{
		{"at capacity", []corev1.EndpointSubset{{Addresses: addrs(600, "10.1"), NotReadyAddresses: addrs(400, "10.2")}}, false, []int{600}, []int{400}},
		{"ready first", []corev1.EndpointSubset{{Addresses: addrs(900, "10.1"), NotReadyAddresses: addrs(300, "10.2")}}, true, []int{900}, []int{100}},
		{"only ready kept", []corev1.EndpointSubset{{Addresses: addrs(1200, "10.1"), NotReadyAddresses: addrs(5, "10.2")}}, true, []int{1000}, []int{0}},
		{"in proportion", []corev1.EndpointSubset{{Addresses: addrs(1500, "10.1")}, {Addresses: addrs(500, "10.2")}}, true, []int{750, 250}, []int{0, 0}},
		{"rounding", []corev1.EndpointSubset{{Addresses: addrs(1001, "10.1")}, {Addresses: addrs(1001, "10.2")}, {Addresses: addrs(1001, "10.3")}}, true, []int{334, 333, 333}, []int{0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, over := truncate(tc.subsets, MaxAddresses)
			ready, notReady := count(got)
			if over != tc.wantOver || !reflect.DeepEqual(ready, tc.wantReady) || !reflect.DeepEqual(notReady, tc.wantNotRdy) {
				t.Errorf("truncate = ready %v notReady %v over %v; want %v %v %v", ready, notReady, over, tc.wantReady, tc.wantNotRdy, tc.wantOver)
			}
		})
	}
}

func TestDesiredLabels(t *testing.T) {
	svc := svcWith()
	svc.Labels = map[string]string{"team": "x"}
	if got := desiredLabels(svc); !reflect.DeepEqual(got, map[string]string{"team": "x", ManagedByLabel: ControllerName}) {
		t.Errorf("labels of a ClusterIP Service = %v", got)
	}
	svc.Spec.ClusterIP = corev1.ClusterIPNone
	if got := desiredLabels(svc); !reflect.DeepEqual(got, map[string]string{"team": "x", ManagedByLabel: ControllerName, corev1.IsHeadlessService: ""}) {
		t.Errorf("labels of a headless Service = %v", got)
	}
}

// Only addresses, labels and the capacity annotation call for a write; the API
// server's empty lists are the controller's nil ones.
func TestUpToDate(t *testing.T) {
	svc := svcWith(corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromString("http")})
	subsets := desiredSubsets(svc, []*corev1.Pod{pod("a", "10.244.0.2")})
	want := desiredLabels(svc)
	cur := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Labels: desiredLabels(svc),
		Annotations: map[string]string{corev1.EndpointsLastChangeTriggerTime: "2026-01-01T00:00:00Z"}},
		Subsets: []corev1.EndpointSubset{{Addresses: subsets[0].Addresses, NotReadyAddresses: []corev1.EndpointAddress{}, Ports: subsets[0].Ports}}}
	if !upToDate(cur, subsets, want, false) {
		t.Error("equal content is not up to date")
	}
	if upToDate(cur, subsets, want, true) {
		t.Error("a missing over-capacity annotation is up to date")
	}
	cur.Labels["extra"] = "x"
	if upToDate(cur, subsets, want, false) {
		t.Error("an extra label is up to date")
	}
	delete(cur.Labels, "extra")
	if upToDate(cur, nil, want, false) {
		t.Error("addresses to remove are up to date")
	}
}
