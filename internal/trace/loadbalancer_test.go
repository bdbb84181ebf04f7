package trace

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func TestDiagnoseLoadBalancer(t *testing.T) {
	svc := func(mut func(*corev1.Service)) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Finalizers: []string{lbServiceFinalizer}},
			Spec:   corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{Hostname: "a1.elb", IP: "127.128.0.1"}}}}}
		if mut != nil {
			mut(s)
		}
		return s
	}
	active := &LBView{Name: "a1", State: "active", Address: "127.128.0.1", Targets: []LBTarget{{ID: "i-0a", Port: 30080, State: "healthy"}}}
	failed := corev1.Event{Reason: lbReasonFailed, Message: "Error syncing load balancer: failed to ensure load balancer: operation error Elastic Load Balancing v2: CreateLoadBalancer, api error TooManyLoadBalancers: limit"}
	for _, c := range []struct {
		name       string
		s          LBSnapshot
		stage, why string
	}{
		{"reachable", LBSnapshot{Service: svc(nil), CloudRead: true, LoadBalancer: active}, "", ""},
		{"ClusterIP", LBSnapshot{Service: svc(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP })}, LBStageObject, "NotLoadBalancer"},
		{"another class", LBSnapshot{Service: svc(func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("x/y") })}, LBStageObject, "OtherClass"},
		{"not seen", LBSnapshot{Service: svc(func(s *corev1.Service) { s.Finalizers = nil; s.Status = corev1.ServiceStatus{} })}, LBStageController, "NotSeen"},
		{"cloud error", LBSnapshot{Service: svc(func(s *corev1.Service) { s.Status = corev1.ServiceStatus{} }), Events: []corev1.Event{failed}}, LBStageELB, "TooManyLoadBalancers"},
		{"bad annotation", LBSnapshot{Service: svc(nil), Events: []corev1.Event{{Reason: lbReasonFailed, Message: "annotation x: bad"}}}, LBStageController, lbReasonFailed},
		{"recovered", LBSnapshot{Service: svc(nil), Events: []corev1.Event{failed, {Reason: "EnsuredLoadBalancer"}}, CloudRead: true, LoadBalancer: active}, "", ""},
		{"gone from the cloud", LBSnapshot{Service: svc(nil), CloudRead: true}, LBStageELB, "LoadBalancerNotFound"},
		{"provisioning", LBSnapshot{Service: svc(nil), CloudRead: true, LoadBalancer: &LBView{State: "provisioning"}}, LBStageELB, "provisioning"},
		{"no targets", LBSnapshot{Service: svc(nil), CloudRead: true, LoadBalancer: &LBView{State: "active"}}, LBStageTargets, "NoTargets"},
		{"unhealthy", LBSnapshot{Service: svc(nil), CloudRead: true, LoadBalancer: &LBView{State: "active", Targets: []LBTarget{{ID: "i-0a", State: "unhealthy", About: "Target.FailedHealthChecks"}}}}, LBStageTargets, "NoHealthyTargets"},
		{"ingress build failed", LBSnapshot{Kind: "Ingress", Ingress: &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Finalizers: []string{lbIngressFinalizer}}},
			Events: []corev1.Event{{Reason: lbReasonBuild, Message: "Failed build model due to backend service shop/db is of type ClusterIP"}}}, LBStageController, lbReasonBuild},
	} {
		d := DiagnoseLoadBalancer(&c.s)
		if d.Stage != c.stage || d.Reason != c.why {
			t.Errorf("%s: %+v, want stage %q reason %q", c.name, d, c.stage, c.why)
		}
	}
}

func TestCollectAndWriteLoadBalancer(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "0f9e8d7c-6b5a-4938-2716-05f4e3d2c1b0"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}}}}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web.1"}, InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: "shop", Name: "web"},
		Reason: "SyncLoadBalancerFailed", Type: corev1.EventTypeWarning, Message: "Error syncing load balancer: failed to ensure load balancer: throttled", FirstTimestamp: metav1.Now()}
	client := fake.NewClientset(svc, ev)
	target, err := ParseTarget("svc/web", "shop")
	if err != nil || target.Kind != "Service" {
		t.Fatalf("%+v %v", target, err)
	}
	s, err := CollectLoadBalancer(context.Background(), Sources{Client: client}, target)
	if err != nil {
		t.Fatal(err)
	}
	if serviceLBName(string(svc.UID)) != "a0f9e8d7c6b5a4938271605f4e3d2c1b" {
		t.Error("the load balancer's name")
	}
	var b bytes.Buffer
	if err := WriteLoadBalancerTrace(&b, s, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Service shop/web", "↓ cloud-controller-manager", "SyncLoadBalancerFailed", "↓ ELB API", "stuck at cloud-controller-manager"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("trace lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := WriteLoadBalancerWhy(&b, s); err != nil || !strings.Contains(b.String(), "stage: cloud-controller-manager") {
		t.Errorf("why: %v\n%s", err, b.String())
	}
}
