package ingress

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/cloudprovider"
)

func TestOfClass(t *testing.T) {
	classes := map[string]string{"alb": ControllerName, "nginx": "k8s.io/ingress-nginx", "internal-alb": ControllerName}
	for _, c := range []struct {
		class  *string
		legacy string
		want   bool
	}{
		{ptr.To("alb"), "", true},
		{ptr.To("internal-alb"), "", true},
		{ptr.To("nginx"), "", false},
		{ptr.To("unknown"), "alb", false},
		{nil, "alb", true},
		{nil, "nginx", false},
		{nil, "", false},
	} {
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{annLegacyClass: c.legacy}},
			Spec: networkingv1.IngressSpec{IngressClassName: c.class}}
		if got := ofClass(ing, classes); got != c.want {
			t.Errorf("class %v legacy %q: %v", ptr.Deref(c.class, "<nil>"), c.legacy, got)
		}
	}
}

func TestGroupAndName(t *testing.T) {
	own := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "storefront"}}
	grouped := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "api", Annotations: map[string]string{AnnotationGroupName: "public"}}}
	if GroupKey(own) != "shop/storefront" || GroupKey(grouped) != "group/public" {
		t.Errorf("groups %q %q", GroupKey(own), GroupKey(grouped))
	}
	for _, g := range []string{"shop/storefront", "group/public", "group/a-very-long-group-name-indeed", "verylongnamespace/verylongingressname"} {
		n := LoadBalancerName(g)
		if len(n) > 32 || n[:4] != "k8s-" || n != LoadBalancerName(g) {
			t.Errorf("%s: %q", g, n)
		}
	}
	if LoadBalancerName("shop/a") == LoadBalancerName("shop/b") {
		t.Error("two groups, one name")
	}
}

func TestPathPatterns(t *testing.T) {
	for _, c := range []struct {
		typ  networkingv1.PathType
		path string
		want []string
	}{
		{networkingv1.PathTypePrefix, "/api", []string{"/api", "/api/*"}},
		{networkingv1.PathTypePrefix, "/api/", []string{"/api", "/api/*"}},
		{networkingv1.PathTypePrefix, "/", []string{"/*"}},
		{networkingv1.PathTypeExact, "/healthz", []string{"/healthz"}},
		{networkingv1.PathTypeImplementationSpecific, "/img/*.png", []string{"/img/*.png"}},
		{networkingv1.PathTypeImplementationSpecific, "", []string{"/"}},
	} {
		if got := PathPatterns(networkingv1.HTTPIngressPath{Path: c.path, PathType: &c.typ}); !slices.Equal(got, c.want) {
			t.Errorf("%s %q: %v", c.typ, c.path, got)
		}
	}
}

func TestListenPorts(t *testing.T) {
	for v, want := range map[string][]int32{"": {80}, `[{"HTTP": 8080}]`: {8080}, `[{"HTTP": 80}, {"HTTP": 8080}]`: {80, 8080}, `[{"HTTPS": 443}]`: nil, `[{"HTTP": 0}]`: nil, `nope`: nil} {
		a := map[string]string{}
		if v != "" {
			a[AnnotationListenPorts] = v
		}
		got, err := listenPorts(a)
		if !slices.Equal(got, want) || (err != nil) != (want == nil) {
			t.Errorf("%q: %v, %v", v, got, err)
		}
	}
}

func backend(svc string, port int32) networkingv1.IngressBackend {
	return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: port}}}
}

func rule(host string, paths ...networkingv1.HTTPIngressPath) networkingv1.IngressRule {
	return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}
}

func prefix(p, svc string) networkingv1.HTTPIngressPath {
	return networkingv1.HTTPIngressPath{Path: p, PathType: ptr.To(networkingv1.PathTypePrefix), Backend: backend(svc, 80)}
}

func testWorld(types map[string]corev1.ServiceType) World {
	nodes := []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0a"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}}
	return World{Nodes: nodes,
		Services: func(ns, name string) (*corev1.Service, error) {
			typ, ok := types[name]
			if !ok {
				return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, name)
			}
			np := int32(0)
			if typ != corev1.ServiceTypeClusterIP {
				np = 30000 + int32(len(name))
			}
			return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Type: typ,
				Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: np}}}}, nil
		},
		Slices: func(ns, svc string) []*discoveryv1.EndpointSlice {
			return []*discoveryv1.EndpointSlice{{AddressType: discoveryv1.AddressTypeIPv4,
				Ports:     []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
				Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.7"}}}}}
		}}
}

func TestDesiredLoadBalancer(t *testing.T) {
	w := testWorld(map[string]corev1.ServiceType{"web": corev1.ServiceTypeNodePort, "api": corev1.ServiceTypeLoadBalancer, "db": corev1.ServiceTypeClusterIP})
	a := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "a", Annotations: map[string]string{
		AnnotationGroupName: "public", AnnotationScheme: "internet-facing", AnnotationListenPorts: `[{"HTTP": 80}, {"HTTP": 8080}]`}},
		Spec: networkingv1.IngressSpec{DefaultBackend: ptr.To(backend("web", 80)),
			Rules: []networkingv1.IngressRule{rule("shop.example.com", prefix("/api", "api"), prefix("/", "web"))}}}
	b := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "b", Annotations: map[string]string{AnnotationGroupName: "public"}},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{rule("", networkingv1.HTTPIngressPath{Path: "/status",
			PathType: ptr.To(networkingv1.PathTypeExact), Backend: backend("api", 80)})}}}
	lb, err := DesiredLoadBalancer("group/public", []*networkingv1.Ingress{a, b}, w, "lab")
	if err != nil {
		t.Fatal(err)
	}
	if lb.Type != "application" || lb.Scheme != "internet-facing" || len(lb.Listeners) != 2 || lb.Listeners[1].Port != 8080 {
		t.Fatalf("%+v", lb)
	}
	l := lb.Listeners[0]
	if l.Default == nil || l.Default.Port != 30003 || l.Default.Health.Path != "/" {
		t.Errorf("default %+v", l.Default)
	}
	var got []string
	for _, r := range l.Rules {
		got = append(got, fmt.Sprint(r.Priority, r.Hosts, r.Paths, r.TargetGroup.Port, r.TargetGroup.Targets))
	}
	want := []string{"1 [shop.example.com] [/api /api/*] 30003 [{i-0a 30003}]", "2 [shop.example.com] [/*] 30003 [{i-0a 30003}]",
		"3 [] [/status] 30003 [{i-0a 30003}]"}
	if !slices.Equal(got, want) {
		t.Errorf("rules\n%q\nwant\n%q", got, want)
	}
	if l.Rules[0].TargetGroup.Name == l.Rules[1].TargetGroup.Name || l.Rules[1].TargetGroup.Name != l.Default.Name {
		t.Error("target group names: one per backend Service")
	}

	// ip targets; the scheme's default is internal.
	ip := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "ip", Annotations: map[string]string{AnnotationTargetType: "ip", AnnotationHealthPath: "/ready"}},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{rule("db.example.com", prefix("/", "db"))}}}
	lb, err = DesiredLoadBalancer("shop/ip", []*networkingv1.Ingress{ip}, w, "lab")
	if err != nil {
		t.Fatal(err)
	}
	tg := lb.Listeners[0].Rules[0].TargetGroup
	if lb.Scheme != "internal" || lb.Listeners[0].Port != 80 || lb.Listeners[0].Default != nil || tg.TargetType != "ip" ||
		!cloudprovider.EqualTargets(tg.Targets, []cloudprovider.Target{{ID: "10.244.0.7", Port: 8080}}) || tg.Health.Path != "/ready" {
		t.Errorf("ip: %+v %+v", lb, tg)
	}

	for name, bad := range map[string]*networkingv1.Ingress{
		"instance target of a ClusterIP Service": {ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "x"},
			Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{rule("", prefix("/", "db"))}}},
		"missing Service": {ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "x"},
			Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{rule("", prefix("/", "gone"))}}},
		"HTTPS": {ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "x", Annotations: map[string]string{AnnotationListenPorts: `[{"HTTPS": 443}]`}}},
	} {
		if _, err := DesiredLoadBalancer("shop/x", []*networkingv1.Ingress{bad}, w, "lab"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
