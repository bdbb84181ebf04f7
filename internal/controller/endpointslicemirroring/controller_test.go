package endpointslicemirroring

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

func mirroredSlices(t *testing.T, c kubernetes.Interface, ns, name string) []discoveryv1.EndpointSlice {
	t.Helper()
	list, err := c.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// addresses of the one slice in list, or why there is not one.
func addresses(list []discoveryv1.EndpointSlice) (string, error) {
	if len(list) != 1 {
		return "", fmt.Errorf("%d slices", len(list))
	}
	var out string
	for _, e := range list[0].Endpoints {
		out += fmt.Sprintf("%s(%v) ", e.Addresses[0], *e.Conditions.Ready)
	}
	return out, nil
}

// The Endpoints of a Service without a selector are mirrored into a slice through
// create, update and delete; those of a Service with a selector, or labelled
// skip-mirror, are not.
func TestMirrorsCustomEndpoints(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	c := s.Client
	const ns = "mirror"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.RunController(t, c, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return New(Config{}, c, f)
	})
	for _, svc := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "ext"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "example", Port: 80}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "selected"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "x"}, Ports: []corev1.ServicePort{{Port: 80}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "skipped"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
	} {
		if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	endpoints := func(name, ip string, labels map[string]string) *corev1.Endpoints {
		return &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Port: 80}}, Addresses: []corev1.EndpointAddress{{IP: ip}},
				NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.1.2.9"}}}}}
	}
	ep, err := c.CoreV1().Endpoints(ns).Create(ctx, endpoints("ext", "10.1.2.3", map[string]string{"team": "x"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range []*corev1.Endpoints{endpoints("selected", "10.1.2.4", nil),
		endpoints("skipped", "10.1.2.5", map[string]string{discoveryv1.LabelSkipMirror: "true"})} {
		if _, err := c.CoreV1().Endpoints(ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	testutil.Eventually(t, "the mirrored slice", func() (bool, error) {
		got, err := addresses(mirroredSlices(t, c, ns, "ext"))
		return got == "10.1.2.3(true) 10.1.2.9(false) ", fmt.Errorf("%q %v", got, err)
	})
	sl := mirroredSlices(t, c, ns, "ext")[0]
	ref := metav1.GetControllerOf(&sl)
	if sl.Labels[discoveryv1.LabelManagedBy] != ControllerName || sl.Labels["team"] != "x" || sl.GenerateName != "ext-" ||
		ref == nil || ref.Kind != "Endpoints" || ref.UID != ep.UID || len(sl.Ports) != 1 || *sl.Ports[0].Port != 80 {
		t.Errorf("slice %s: labels %v generateName %q owner %v ports %v", sl.Name, sl.Labels, sl.GenerateName, sl.OwnerReferences, sl.Ports)
	}
	testutil.Consistently(t, 500*time.Millisecond, "nothing mirrored for a Service with a selector or a skip-mirror label", func() error {
		for _, name := range []string{"selected", "skipped"} {
			for _, s := range mirroredSlices(t, c, ns, name) {
				if s.Labels[discoveryv1.LabelManagedBy] == ControllerName {
					return fmt.Errorf("%s mirrored into %s", name, s.Name)
				}
			}
		}
		if got := mirroredSlices(t, c, ns, "ext"); len(got) != 1 || got[0].ResourceVersion != sl.ResourceVersion {
			return fmt.Errorf("the mirrored slice rewritten with nothing changed")
		}
		return nil
	})

	// An update is mirrored into the same slice.
	ep.Subsets[0].Addresses[0].IP = "10.2.3.4"
	if _, err := c.CoreV1().Endpoints(ns).Update(ctx, ep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the update mirrored", func() (bool, error) {
		list := mirroredSlices(t, c, ns, "ext")
		got, err := addresses(list)
		return got == "10.1.2.9(false) 10.2.3.4(true) " && list[0].Name == sl.Name, fmt.Errorf("%q %v", got, err)
	})

	// The Endpoints goes: so does its slice.
	if err := c.CoreV1().Endpoints(ns).Delete(ctx, "ext", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the mirrored slice deleted", func() bool { return len(mirroredSlices(t, c, ns, "ext")) == 0 })
}
