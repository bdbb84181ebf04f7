package resourcequota_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/controller/resourcequota"
	"github.com/kubelab/kubelab/internal/testutil"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// startController runs the controller against client until the test ends.
func startController(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	controllertest.RunController(t, client, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return resourcequota.New(resourcequota.Config{}, client, f)
	})
}

// usedIs checks the quota's status.used against want (by quantity).
func usedIs(client kubernetes.Interface, ns, name string, want corev1.ResourceList) func() error {
	return func() error {
		rq, err := client.CoreV1().ResourceQuotas(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for k, v := range want {
			if got, ok := rq.Status.Used[k]; !ok || got.Cmp(v) != 0 {
				return fmt.Errorf("status %v, want used %s=%s", rq.Status, k, v.String())
			}
		}
		if len(rq.Status.Hard) != len(rq.Spec.Hard) {
			return fmt.Errorf("status.hard %v, want spec.hard %v", rq.Status.Hard, rq.Spec.Hard)
		}
		return nil
	}
}

// The controller fills a new quota's status, and gives back what deletions, finished
// pods and deleted objects of other kinds (count/deployments.apps) free.
func TestControllerRecountsUsage(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	client := s.Client
	startController(t, client)
	ctx := context.Background()
	ns := "quota-controller"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Pods run as the "default" ServiceAccount, which no controller creates here.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "busybox"}}}}
	}
	// Objects that exist before the quota are counted when it is created.
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod("before"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Spec: corev1.ResourceQuotaSpec{
		Hard: rl("pods", "10", "count/pods", "10", "configmaps", "10", "count/deployments.apps", "2")}}
	if _, err := client.CoreV1().ResourceQuotas(ns).Create(ctx, rq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 30*time.Second, "the new quota's status", usedIs(client, ns, "q", rl("pods", "1", "count/pods", "1", "configmaps", "0", "count/deployments.apps", "0")))

	for _, name := range []string{"a", "b"} {
		if _, err := client.CoreV1().Pods(ns).Create(ctx, pod(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.EventuallyWithin(t, 30*time.Second, "pods charged", usedIs(client, ns, "q", rl("pods", "3")))

	if err := client.CoreV1().Pods(ns).Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 30*time.Second, "a deleted pod given back", usedIs(client, ns, "q", rl("pods", "2", "count/pods", "2")))

	b, err := client.CoreV1().Pods(ns).Get(ctx, "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Status.Phase = corev1.PodSucceeded
	if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 30*time.Second, "a finished pod given back", usedIs(client, ns, "q", rl("pods", "1", "count/pods", "2")))

	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "d"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "d"}}, Spec: pod("t").Spec}}}
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 30*time.Second, "a deployment charged", usedIs(client, ns, "q", rl("count/deployments.apps", "1")))
	if err := client.AppsV1().Deployments(ns).Delete(ctx, "d", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 30*time.Second, "a deleted deployment given back", usedIs(client, ns, "q", rl("count/deployments.apps", "0")))

	// Raising hard shows in status at once.
	cur, err := client.CoreV1().ResourceQuotas(ns).Get(ctx, "q", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Hard["services"] = resource.MustParse("1")
	if _, err := client.CoreV1().ResourceQuotas(ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 30*time.Second, "a new hard resource", usedIs(client, ns, "q", rl("services", "0")))
}

// A quota on an extended resource's requests and on replicationcontrollers (and
// count/replicationcontrollers) is counted by the controller and held by admission.
func TestExtendedResourcesAndReplicationControllers(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	client := s.Client
	startController(t, client)
	ctx := context.Background()
	ns := "quota-extended"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	hard := rl("requests.example.com/dongle", "3", "replicationcontrollers", "10", "count/replicationcontrollers", "10")
	if _, err := client.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q"},
		Spec: corev1.ResourceQuotaSpec{Hard: hard}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "nothing used yet", usedIs(client, ns, "q", rl("requests.example.com/dongle", "0", "replicationcontrollers", "0", "count/replicationcontrollers", "0")))

	dongles := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: rl("example.com/dongle", "2"), Limits: rl("example.com/dongle", "2")}}}}}
	}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, dongles("fits"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "two dongles used", usedIs(client, ns, "q", rl("requests.example.com/dongle", "2")))
	if _, err := client.CoreV1().Pods(ns).Create(ctx, dongles("over"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a pod taking the dongles past the quota: %v, want Forbidden", err)
	}

	rc := &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "rc"}, Spec: corev1.ReplicationControllerSpec{
		Replicas: ptr.To[int32](0), Selector: map[string]string{"app": "rc"},
		Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "rc"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "busybox"}}}}}}
	if _, err := client.CoreV1().ReplicationControllers(ns).Create(ctx, rc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "one replication controller", usedIs(client, ns, "q", rl("replicationcontrollers", "1", "count/replicationcontrollers", "1")))
	background := metav1.DeletePropagationBackground
	if err := client.CoreV1().ReplicationControllers(ns).Delete(ctx, "rc", metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the replication controller given back", usedIs(client, ns, "q", rl("replicationcontrollers", "0", "count/replicationcontrollers", "0")))
}
