package endpoint

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

func run(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	controllertest.RunController(t, client, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return New(Config{}, client, f)
	})
}

func getEndpoints(client kubernetes.Interface, ns, name string) (*corev1.Endpoints, error) {
	return client.CoreV1().Endpoints(ns).Get(context.Background(), name, metav1.GetOptions{})
}

// A Service with a selector gets its Endpoints, labelled and annotated as upstream's,
// kept as its pods change, and deleted with it; Endpoints someone else wrote for a
// name without a Service stay.
func TestEndpointsFollowTheService(t *testing.T) {
	ctx := context.Background()
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	svc := svcWith(corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP})
	svc.Labels = map[string]string{"team": "x"}
	svc.CreationTimestamp = metav1.NewTime(created)
	custom := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "custom", Namespace: "ns", Labels: map[string]string{"mine": "true"}},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.24"}}, Ports: []corev1.EndpointPort{{Port: 80}}}}}
	client := fake.NewClientset(svc, custom, pod("a", "10.244.0.2"), pod("b", "10.244.0.3", notReady))
	run(t, client)

	testutil.Eventually(t, "the Endpoints of ns/web", func() (bool, error) {
		ep, err := getEndpoints(client, "ns", "web")
		if err != nil {
			return false, err
		}
		got := fmt.Sprint(ips(ep.Subsets))
		return got == "[[http/8080] ready[10.244.0.2] notReady[10.244.0.3]]", errors.New(got)
	})
	ep, _ := getEndpoints(client, "ns", "web")
	if ep.Labels[ManagedByLabel] != ControllerName || ep.Labels["team"] != "x" {
		t.Errorf("labels %v", ep.Labels)
	}
	if got := ep.Annotations[corev1.EndpointsLastChangeTriggerTime]; got != created.Format(time.RFC3339Nano) {
		t.Errorf("trigger time of the first write = %q, want the Service's creation %s", got, created.Format(time.RFC3339Nano))
	}
	if _, ok := ep.Annotations[corev1.EndpointsOverCapacity]; ok {
		t.Errorf("over-capacity annotation on %d addresses", 2)
	}

	// b turns ready: it moves to addresses, and the trigger time is its transition.
	b, _ := client.CoreV1().Pods("ns").Get(ctx, "b", metav1.GetOptions{})
	readyAt := created.Add(time.Hour)
	b.ResourceVersion = "2" // the fake keeps none; the informer skips updates without a new one
	b.Status.Conditions[0] = corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(readyAt)}
	if _, err := client.CoreV1().Pods("ns").UpdateStatus(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "b ready in the Endpoints", func() (bool, error) {
		ep, err := getEndpoints(client, "ns", "web")
		if err != nil {
			return false, err
		}
		got := fmt.Sprint(ips(ep.Subsets))
		return got == "[[http/8080] ready[10.244.0.2 10.244.0.3] notReady[]]" &&
			ep.Annotations[corev1.EndpointsLastChangeTriggerTime] == readyAt.Format(time.RFC3339Nano), fmt.Errorf("%s %v", got, ep.Annotations)
	})

	// The Service goes: so do its Endpoints, but not the ones without a Service.
	if err := client.CoreV1().Services("ns").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the Endpoints deleted with the Service", func() bool {
		_, err := getEndpoints(client, "ns", "web")
		return apierrors.IsNotFound(err)
	})
	testutil.Consistently(t, 300*time.Millisecond, "Endpoints of another writer kept", func() error {
		_, err := getEndpoints(client, "ns", "custom")
		return err
	})
}

// Past 1000 addresses the Endpoints is cut, ready addresses first, and says so.
func TestEndpointsOverCapacity(t *testing.T) {
	svc := svcWith(corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)})
	objs := []runtime.Object{svc}
	for i := 0; i < MaxAddresses+10; i++ {
		var opts []podOpt
		if i%2 == 0 {
			opts = append(opts, notReady)
		}
		objs = append(objs, pod(fmt.Sprintf("p%d", i), fmt.Sprintf("10.244.%d.%d", i/250, i%250), opts...))
	}
	client := fake.NewClientset(objs...)
	run(t, client)
	testutil.Eventually(t, "truncated Endpoints", func() (bool, error) {
		ep, err := getEndpoints(client, "ns", "web")
		if err != nil {
			return false, err
		}
		ready, notReady := len(ep.Subsets[0].Addresses), len(ep.Subsets[0].NotReadyAddresses)
		return ep.Annotations[corev1.EndpointsOverCapacity] == "truncated" && ready == 505 && notReady == 495,
			fmt.Errorf("ready %d notReady %d annotations %v", ready, notReady, ep.Annotations)
	})
}

// Endpoints the API server refuses because the namespace is going are not retried.
func TestTerminatingNamespaceIsNotRetried(t *testing.T) {
	client := fake.NewClientset(svcWith(corev1.ServicePort{Name: "http", Port: 80}), pod("a", "10.244.0.2"))
	var creates atomic.Int32
	client.PrependReactor("create", "endpoints", func(k8stesting.Action) (bool, runtime.Object, error) {
		creates.Add(1)
		err := apierrors.NewForbidden(corev1.Resource("endpoints"), "web", errors.New("unable to create new content in namespace ns because it is being terminated"))
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: corev1.NamespaceTerminatingCause})
		return true, nil, err
	})
	run(t, client)
	testutil.Eventually(t, "a create", func() bool { return creates.Load() >= 1 })
	testutil.Consistently(t, 500*time.Millisecond, "a single create", func() error {
		if n := creates.Load(); n != 1 {
			return fmt.Errorf("%d creates", n)
		}
		return nil
	})
}
