package controllermanager

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/rest"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// runAsServiceAccounts runs the controller-manager against s with each controller as
// its service account kube-system/<controller>, as a cluster runs it.
func runAsServiceAccounts(t *testing.T, s *apiservertest.Server) {
	t.Helper()
	cm, err := New(Config{ControllerConfig: func(sa string) (*rest.Config, error) {
		return s.ConfigAs(t, serviceaccount.MakeUsername(metav1.NamespaceSystem, sa), serviceaccount.MakeGroupNames(metav1.NamespaceSystem)...), nil
	}}, s.Config)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Start(t, "the controller-manager", 0, cm.Run, testutil.NoWait)
}

// The Endpoints of a Service with a selector are written by the endpoint controller,
// and those written by hand for a Service without one are mirrored into a slice by the
// mirroring controller, each as its own service account, which its role must allow.
func TestEndpointsWrittenAsTheirControllers(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	runAsServiceAccounts(t, s)
	ctx := context.Background()
	c := s.Client
	const ns = "cm-endpoints"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the Endpoints of the Service", func() (bool, error) {
		ep, err := c.CoreV1().Endpoints(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return ep.Labels["endpoints.kubernetes.io/managed-by"] == "endpoint-controller", fmt.Errorf("labels %v", ep.Labels)
	})

	if _, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Endpoints(ns).Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "ext"},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.1.2.3"}}, Ports: []corev1.EndpointPort{{Name: "http", Port: 80}}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the mirrored EndpointSlice", func() (bool, error) {
		list, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=ext," +
			discoveryv1.LabelManagedBy + "=endpointslicemirroring-controller.k8s.io"})
		if err != nil {
			return false, err
		}
		return len(list.Items) == 1, fmt.Errorf("%d slices", len(list.Items))
	})
}
