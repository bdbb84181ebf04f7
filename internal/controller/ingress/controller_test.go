package ingress

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/cloudprovider/fakecloud"
	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// TestIngressGroup: two Ingresses of class alb in one group share a load balancer with
// the rules of both and get its DNS name and the finalizer; an Ingress of another class is
// left alone; deleting one takes its rules off; deleting the last deletes the load
// balancer and lets the Ingress go.
func TestIngressGroup(t *testing.T) {
	cloud := &fakecloud.LoadBalancers{}
	client := fake.NewClientset()
	ctx := context.Background()
	controllertest.AddNode(t, client, controllertest.Node{Name: "a", ProviderID: "aws:///us-east-1a/i-0a"})
	for _, ic := range []*networkingv1.IngressClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "alb"}, Spec: networkingv1.IngressClassSpec{Controller: ControllerName}},
		{ObjectMeta: metav1.ObjectMeta{Name: "nginx"}, Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"}},
	} {
		if _, err := client.NetworkingV1().IngressClasses().Create(ctx, ic, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"web", "api"} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
			Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80, NodePort: map[string]int32{"web": 30080, "api": 30081}[name]}}}}
		if _, err := client.CoreV1().Services("shop").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	controllertest.RunController(t, client, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return New(Config{}, client, f, cloud)
	})
	mk := func(name, class, host, svc string) {
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Annotations: map[string]string{AnnotationGroupName: "shop"}},
			Spec: networkingv1.IngressSpec{IngressClassName: ptr.To(class), Rules: []networkingv1.IngressRule{rule(host, prefix("/", svc))}}}
		if _, err := client.NetworkingV1().Ingresses("shop").Create(ctx, ing, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("www", "alb", "www.example.com", "web")
	mk("api", "alb", "api.example.com", "api")
	mk("other", "nginx", "other.example.com", "web")
	name := LoadBalancerName("group/shop")
	get := func(n string) *networkingv1.Ingress {
		ing, err := client.NetworkingV1().Ingresses("shop").Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ing
	}
	hosts := func() []string {
		lb := cloud.Get(name)
		if lb == nil {
			return nil
		}
		var hs []string
		for _, r := range lb.Listeners[0].Rules {
			hs = append(hs, r.Hosts...)
		}
		return hs
	}
	testutil.Eventually(t, "one load balancer with both Ingresses' rules, in their status", func() bool {
		served := true
		for _, n := range []string{"www", "api"} {
			ing := get(n)
			served = served && len(ing.Status.LoadBalancer.Ingress) == 1 && ing.Status.LoadBalancer.Ingress[0].Hostname == name+".elb.example" &&
				slices.Contains(ing.Finalizers, Finalizer)
		}
		return served && slices.Equal(hosts(), []string{"api.example.com", "www.example.com"})
	})
	if o := get("other"); len(o.Finalizers) != 0 || len(o.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("the nginx Ingress was touched: %+v", o)
	}
	testutil.Eventually(t, "SuccessfullyReconciled", func() bool { return controllertest.HasEvent(t, client, "shop", "www", "SuccessfullyReconciled") })

	// The fake clientset does not hold objects for finalizers: mark deletion as the API
	// server would.
	markDeleted := func(n string) {
		ing := get(n)
		ing.DeletionTimestamp = ptr.To(metav1.Now())
		if _, err := client.NetworkingV1().Ingresses("shop").Update(ctx, ing, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	markDeleted("api")
	testutil.Eventually(t, "the deleted Ingress's rules gone, its finalizer dropped", func() bool {
		return slices.Equal(hosts(), []string{"www.example.com"}) && !slices.Contains(get("api").Finalizers, Finalizer)
	})
	markDeleted("www")
	testutil.Eventually(t, "the load balancer deleted with the last Ingress", func() bool {
		return cloud.Get(name) == nil && !slices.Contains(get("www").Finalizers, Finalizer)
	})
}

// TestIngressSyncSkipsUnchanged: a group synced again with nothing changed (as on every
// unrelated Service or EndpointSlice event) makes no call to the cloud.
func TestIngressSyncSkipsUnchanged(t *testing.T) {
	cloud := &fakecloud.LoadBalancers{}
	client := fake.NewClientset()
	ctx := context.Background()
	controllertest.AddNode(t, client, controllertest.Node{Name: "a", ProviderID: "aws:///us-east-1a/i-0a"})
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
		Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}}}}
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "www", Annotations: map[string]string{annLegacyClass: ClassName}},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{rule("www.example.com", prefix("/", "web"))}}}
	if _, err := client.CoreV1().Services("shop").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.NetworkingV1().Ingresses("shop").Create(ctx, ing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(Config{}, client, factory, cloud)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	settled := func() {
		t.Helper()
		if err := c.sync(ctx, "shop/www"); err != nil {
			t.Fatal(err)
		}
		cur, err := client.NetworkingV1().Ingresses("shop").Get(ctx, "www", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, "the informer to see the Ingress as written", func() bool {
			got, err := c.ingresses.Ingresses("shop").Get("www")
			return err == nil && got.ResourceVersion == cur.ResourceVersion
		})
	}
	settled() // finalizer and status written
	settled() // the Ingress's new version: ensured once more
	calls := cloud.Calls("EnsureLoadBalancer")
	if err := c.sync(ctx, "shop/www"); err != nil {
		t.Fatal(err)
	}
	if got := cloud.Calls("EnsureLoadBalancer"); got != calls {
		t.Errorf("a sync with nothing changed called the cloud: %d calls, had %d", got, calls)
	}
}
