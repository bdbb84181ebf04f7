package service

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/cloudprovider"
)

func lbService(ann map[string]string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "0f9e8d7c-6b5a-4938-2716-05f4e3d2c1b0", Annotations: ann},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: ports}}
}

func node(name, providerID string, ready corev1.ConditionStatus, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
}

func TestLoadBalancerName(t *testing.T) {
	got := LoadBalancerName(lbService(nil))
	if got != "a0f9e8d7c6b5a4938271605f4e3d2c1b" || len(got) != 32 {
		t.Errorf("name %q", got)
	}
}

func TestWantsLoadBalancer(t *testing.T) {
	deleting := lbService(nil)
	deleting.DeletionTimestamp = &metav1.Time{}
	classed := lbService(nil)
	classed.Spec.LoadBalancerClass = ptr.To("example.com/other")
	nodePort := lbService(nil)
	nodePort.Spec.Type = corev1.ServiceTypeNodePort
	for name, c := range map[string]struct {
		svc  *corev1.Service
		want bool
	}{"LoadBalancer": {lbService(nil), true}, "deleting": {deleting, false}, "another class": {classed, false}, "NodePort": {nodePort, false}} {
		if got := wantsLoadBalancer(c.svc); got != c.want {
			t.Errorf("%s: %v", name, got)
		}
	}
}

func TestEligibleNodes(t *testing.T) {
	nodes := []*corev1.Node{
		node("a", "aws:///us-east-1a/i-0b", corev1.ConditionTrue, nil),
		node("b", "aws:///us-east-1a/i-0a", corev1.ConditionTrue, nil),
		node("not-ready", "aws:///us-east-1a/i-0c", corev1.ConditionFalse, nil),
		node("excluded", "aws:///us-east-1a/i-0d", corev1.ConditionTrue, map[string]string{cloudprovider.LabelExcludeFromLB: ""}),
		node("no-instance", "", corev1.ConditionTrue, nil),
	}
	got := cloudprovider.InstanceTargets(nodes, 30080)
	if len(got) != 2 || got[0].ID != "i-0a" || got[1].ID != "i-0b" || got[1].Port != 30080 {
		t.Errorf("instances %v", got)
	}
}

func TestScheme(t *testing.T) {
	for _, c := range []struct {
		ann     map[string]string
		want    string
		wantErr bool
	}{
		{nil, "internet-facing", false},
		{map[string]string{AnnotationScheme: "internal"}, "internal", false},
		{map[string]string{AnnotationInternal: "true"}, "internal", false},
		{map[string]string{AnnotationType: "external"}, "internal", false},
		{map[string]string{AnnotationType: "external", AnnotationScheme: "internet-facing"}, "internet-facing", false},
		{map[string]string{AnnotationType: "nlb"}, "internet-facing", false},
		{map[string]string{AnnotationScheme: "public"}, "", true},
	} {
		got, err := lbScheme(c.ann)
		if got != c.want || (err != nil) != c.wantErr {
			t.Errorf("%v: %q, %v", c.ann, got, err)
		}
	}
}

func TestHealthCheck(t *testing.T) {
	local := lbService(nil)
	local.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	local.Spec.HealthCheckNodePort = 31999
	tcp := cloudprovider.HealthCheck{Protocol: "TCP", Port: "traffic-port", Interval: 10, Timeout: 10, Healthy: 3, Unhealthy: 3}
	for _, c := range []struct {
		name    string
		svc     *corev1.Service
		tt      string
		want    cloudprovider.HealthCheck
		wantErr bool
	}{
		{"default", lbService(nil), "instance", tcp, false},
		{"Local", local, "instance", cloudprovider.HealthCheck{Protocol: "HTTP", Port: "31999", Path: "/healthz", Interval: 10, Timeout: 10, Healthy: 3, Unhealthy: 3}, false},
		{"Local with ip targets", local, "ip", tcp, false},
		{"annotations", lbService(map[string]string{AnnotationHCProtocol: "http", AnnotationHCPath: "/ready", AnnotationHCPort: "8080",
			AnnotationHCInterval: "5", AnnotationHCTimeout: "2", AnnotationHCHealthy: "2", AnnotationHCUnhealthy: "2"}), "instance",
			cloudprovider.HealthCheck{Protocol: "HTTP", Port: "8080", Path: "/ready", Interval: 5, Timeout: 2, Healthy: 2, Unhealthy: 2}, false},
		{"http without a path", lbService(map[string]string{AnnotationHCProtocol: "HTTP"}), "instance",
			cloudprovider.HealthCheck{Protocol: "HTTP", Port: "traffic-port", Path: "/", Interval: 10, Timeout: 10, Healthy: 3, Unhealthy: 3}, false},
		{"bad protocol", lbService(map[string]string{AnnotationHCProtocol: "grpc"}), "instance", tcp, true},
		{"bad port", lbService(map[string]string{AnnotationHCPort: "http"}), "instance", tcp, true},
		{"bad interval", lbService(map[string]string{AnnotationHCInterval: "-1"}), "instance", tcp, true},
	} {
		got, err := healthCheck(c.svc, c.tt)
		if (err != nil) != c.wantErr || (err == nil && got != c.want) {
			t.Errorf("%s: %+v, %v", c.name, got, err)
		}
	}
}

func TestDesiredLoadBalancer(t *testing.T) {
	nodes := []*corev1.Node{node("a", "aws:///us-east-1a/i-0a", corev1.ConditionTrue, nil), node("b", "aws:///us-east-1b/i-0b", corev1.ConditionTrue, nil)}
	svc := lbService(nil, corev1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080},
		corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, NodePort: 30053})
	lb, err := desiredLoadBalancer(svc, nodes, nil, "lab")
	if err != nil {
		t.Fatal(err)
	}
	if lb.Name != LoadBalancerName(svc) || lb.Type != "network" || lb.Scheme != "internet-facing" ||
		lb.Tags[TagServiceName] != "shop/web" || lb.Tags["kubernetes.io/cluster/lab"] != "owned" || len(lb.Listeners) != 2 {
		t.Fatalf("load balancer %+v", lb)
	}
	l0, l1 := lb.Listeners[0], lb.Listeners[1]
	if l0.Protocol != "TCP" || l0.Port != 80 || l0.Default.Port != 30080 || l0.Default.TargetType != "instance" ||
		!cloudprovider.EqualTargets(l0.Default.Targets, []cloudprovider.Target{{ID: "i-0a", Port: 30080}, {ID: "i-0b", Port: 30080}}) {
		t.Errorf("listener 80: %+v %+v", l0, l0.Default)
	}
	if l1.Protocol != "UDP" || l1.Default.Port != 30053 || l0.Default.Name == l1.Default.Name || len(l0.Default.Name) > 32 {
		t.Errorf("listener 53: %+v %+v", l1, l1.Default)
	}
	// The target group's name changes with what cannot change on a group.
	svc2 := svc.DeepCopy()
	svc2.Spec.Ports[0].NodePort = 30081
	if lb2, _ := desiredLoadBalancer(svc2, nodes, nil, "lab"); lb2.Listeners[0].Default.Name == l0.Default.Name || lb2.Listeners[1].Default.Name != l1.Default.Name {
		t.Error("target group names after a node port change")
	}

	// ip targets: the ready endpoints at the endpoints' port.
	ip := lbService(map[string]string{AnnotationTargetType: "ip"}, corev1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080})
	eps := []*discoveryv1.EndpointSlice{{AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.1.5"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"10.244.2.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
			{Addresses: []string{"10.244.2.8"}}}}}
	lb, err = desiredLoadBalancer(ip, nodes, eps, "lab")
	if err != nil {
		t.Fatal(err)
	}
	if d := lb.Listeners[0].Default; d.TargetType != "ip" || !cloudprovider.EqualTargets(d.Targets, []cloudprovider.Target{{ID: "10.244.1.5", Port: 8080}, {ID: "10.244.2.8", Port: 8080}}) {
		t.Errorf("ip targets %+v", d)
	}

	for name, bad := range map[string]*corev1.Service{
		"SCTP":         lbService(nil, corev1.ServicePort{Protocol: corev1.ProtocolSCTP, Port: 9, NodePort: 30009}),
		"no node port": lbService(nil, corev1.ServicePort{Protocol: corev1.ProtocolTCP, Port: 80}),
		"no ports":     lbService(nil),
		"target type":  lbService(map[string]string{AnnotationTargetType: "lambda"}, corev1.ServicePort{Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}),
	} {
		if _, err := desiredLoadBalancer(bad, nodes, nil, "lab"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestIngressStatus(t *testing.T) {
	st := ingressStatus(&cloudprovider.Status{DNSName: "a1-0123.elb.us-east-1.amazonaws.com", Address: "127.128.0.5"})
	in := st.Ingress[0]
	if in.Hostname != "a1-0123.elb.us-east-1.amazonaws.com" || in.IP != "127.128.0.5" || *in.IPMode != corev1.LoadBalancerIPModeProxy {
		t.Errorf("%+v", in)
	}
}
