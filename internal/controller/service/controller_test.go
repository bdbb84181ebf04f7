package service

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/cloudprovider"
	"github.com/kubelab/kubelab/internal/cloudprovider/fakecloud"
	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

func getService(t *testing.T, client *fake.Clientset, name string) *corev1.Service {
	t.Helper()
	s, err := client.CoreV1().Services("shop").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func targetsOf(cloud *fakecloud.LoadBalancers, name string) []cloudprovider.Target {
	lb := cloud.Get(name)
	if lb == nil || len(lb.Listeners) == 0 {
		return nil
	}
	return lb.Listeners[0].Default.Targets
}

// TestServiceLoadBalancer: a LoadBalancer Service gets the finalizer, a load balancer with
// the Ready nodes as targets and its status; a new node joins the targets
// (UpdatedLoadBalancer); a cloud failure is a SyncLoadBalancerFailed event and is retried;
// a change to ClusterIP deletes the load balancer, clears the status and drops the
// finalizer.
func TestServiceLoadBalancer(t *testing.T) {
	cloud := &fakecloud.LoadBalancers{}
	client := fake.NewClientset()
	ctx := context.Background()
	controllertest.AddNode(t, client, controllertest.Node{Name: "a", ProviderID: "aws:///us-east-1a/i-0a"})
	controllertest.AddNode(t, client, controllertest.Node{Name: "x", ProviderID: "aws:///us-east-1a/i-0x", Labels: map[string]string{cloudprovider.LabelExcludeFromLB: "true"}})
	controllertest.RunController(t, client, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return New(Config{ClusterName: "lab"}, client, f, cloud)
	})
	svc := lbService(nil, corev1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080})
	if _, err := client.CoreV1().Services("shop").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	name := LoadBalancerName(svc)
	testutil.Eventually(t, "the status names the load balancer", func() bool {
		s := getService(t, client, "web")
		return len(s.Status.LoadBalancer.Ingress) == 1 && s.Status.LoadBalancer.Ingress[0].Hostname == name+".elb.example" &&
			s.Status.LoadBalancer.Ingress[0].IP == "127.128.0.1" && slices.Contains(s.Finalizers, Finalizer)
	})
	if got := targetsOf(cloud, name); !cloudprovider.EqualTargets(got, []cloudprovider.Target{{ID: "i-0a", Port: 30080}}) {
		t.Errorf("targets %+v", got)
	}
	for _, r := range []string{"EnsuringLoadBalancer", "EnsuredLoadBalancer"} {
		testutil.Eventually(t, r, func() bool { return controllertest.HasEvent(t, client, "shop", "web", r) })
	}

	controllertest.AddNode(t, client, controllertest.Node{Name: "b", ProviderID: "aws:///us-east-1b/i-0b"})
	testutil.Eventually(t, "the new node a target", func() bool {
		return cloudprovider.EqualTargets(targetsOf(cloud, name), []cloudprovider.Target{{ID: "i-0a", Port: 30080}, {ID: "i-0b", Port: 30080}})
	})
	testutil.Eventually(t, "UpdatedLoadBalancer", func() bool { return controllertest.HasEvent(t, client, "shop", "web", "UpdatedLoadBalancer") })

	cloud.Fail(errors.New("Throttling: Rate exceeded"))
	cur := getService(t, client, "web")
	cur.Annotations = map[string]string{AnnotationHCInterval: "5"}
	if _, err := client.CoreV1().Services("shop").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "SyncLoadBalancerFailed", func() bool { return controllertest.HasEvent(t, client, "shop", "web", "SyncLoadBalancerFailed") })
	cloud.Fail(nil)
	testutil.Eventually(t, "the retry applied the health check", func() bool {
		lb := cloud.Get(name)
		return lb != nil && lb.Listeners[0].Default.Health.Interval == 5
	})

	cur = getService(t, client, "web")
	cur.Spec.Type = corev1.ServiceTypeClusterIP
	for i := range cur.Spec.Ports {
		cur.Spec.Ports[i].NodePort = 0
	}
	if _, err := client.CoreV1().Services("shop").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the load balancer deleted, the status cleared, the finalizer gone", func() bool {
		s := getService(t, client, "web")
		return cloud.Get(name) == nil && len(s.Status.LoadBalancer.Ingress) == 0 && !slices.Contains(s.Finalizers, Finalizer)
	})
	for _, r := range []string{"DeletingLoadBalancer", "DeletedLoadBalancer"} {
		testutil.Eventually(t, r, func() bool { return controllertest.HasEvent(t, client, "shop", "web", r) })
	}
}

// TestServiceDeletion: a Service being deleted (its deletionTimestamp set, held by the
// finalizer) loses its load balancer, then the finalizer; ip targets follow the
// EndpointSlices.
func TestServiceDeletion(t *testing.T) {
	cloud := &fakecloud.LoadBalancers{}
	client := fake.NewClientset()
	ctx := context.Background()
	controllertest.RunController(t, client, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return New(Config{}, client, f, cloud)
	})
	svc := lbService(map[string]string{AnnotationTargetType: "ip"}, corev1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080})
	svc.Name = "api"
	if _, err := client.CoreV1().Services("shop").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	name := LoadBalancerName(svc)
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "api-1", Labels: map[string]string{discoveryv1.LabelServiceName: "api"}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}}
	if _, err := client.DiscoveryV1().EndpointSlices("shop").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the pod a target", func() bool {
		return cloudprovider.EqualTargets(targetsOf(cloud, name), []cloudprovider.Target{{ID: "10.244.1.9", Port: 8080}})
	})
	cur := getService(t, client, "api")
	if !slices.Contains(cur.Finalizers, Finalizer) {
		t.Fatalf("finalizers %v", cur.Finalizers)
	}
	now := metav1.Now()
	cur.DeletionTimestamp = &now
	if _, err := client.CoreV1().Services("shop").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the load balancer deleted and the finalizer gone", func() bool {
		s, err := client.CoreV1().Services("shop").Get(ctx, "api", metav1.GetOptions{})
		return cloud.Get(name) == nil && (apierrors.IsNotFound(err) || err == nil && !slices.Contains(s.Finalizers, Finalizer))
	})
}

// TestServiceOfAnotherClass: a Service of type LoadBalancer with a loadBalancerClass is
// another controller's: no load balancer, no finalizer, its status left alone.
func TestServiceOfAnotherClass(t *testing.T) {
	cloud := &fakecloud.LoadBalancers{}
	client := fake.NewClientset()
	ctx := context.Background()
	svc := lbService(nil, corev1.ServicePort{Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080})
	svc.Spec.LoadBalancerClass = ptr.To("example.com/metallb")
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}
	if _, err := client.CoreV1().Services("shop").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.RunController(t, client, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return New(Config{}, client, f, cloud)
	})
	// A second Service of ours, made after, proves the first was looked at.
	ours := lbService(nil, corev1.ServicePort{Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30081})
	ours.Name, ours.UID = "ours", "11111111-2222-3333-4444-555555555555"
	if _, err := client.CoreV1().Services("shop").Create(ctx, ours, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "our Service's load balancer", func() bool { return cloud.Get(LoadBalancerName(ours)) != nil })
	s := getService(t, client, "web")
	if cloud.Get(LoadBalancerName(svc)) != nil || len(s.Finalizers) != 0 || len(s.Status.LoadBalancer.Ingress) != 1 || s.Status.LoadBalancer.Ingress[0].IP != "192.0.2.10" {
		t.Errorf("the other class's Service was touched: %+v, %+v", s.Finalizers, s.Status)
	}
}
