package cloudnodelifecycle

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubelab/kubelab/internal/cloudprovider/fakecloud"
	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

func TestDecide(t *testing.T) {
	readyNode := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	notReady := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}}}
	tainted := notReady.DeepCopy()
	tainted.Spec.Taints = withShutdownTaint(nil, true)
	readyTainted := readyNode.DeepCopy()
	readyTainted.Spec.Taints = withShutdownTaint(nil, true)
	for _, c := range []struct {
		name             string
		node             *corev1.Node
		exists, shutdown bool
		want             action
	}{
		{"ready", readyNode, true, false, none},
		{"ready, instance gone (not asked)", readyNode, false, false, none},
		{"ready again after a stop", readyTainted, true, false, removeShutdownTaint},
		{"not ready, stopped", notReady, true, true, addShutdownTaint},
		{"not ready, stopped, tainted", tainted, true, true, none},
		{"not ready, running", notReady, true, false, none},
		{"not ready, gone", notReady, false, false, deleteNode},
		{"no conditions, gone", &corev1.Node{}, false, false, deleteNode},
	} {
		if got := decide(c.node, c.exists, c.shutdown); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestLifecycle: a NotReady node of a stopped instance is tainted, the taint goes when it
// is Ready again; once its instance is gone the node is deleted with a DeletingNode event;
// a Ready node of a gone instance stays.
func TestLifecycle(t *testing.T) {
	cloud := &fakecloud.Cloud{}
	cloud.Put(fakecloud.Instance{ID: "i-0a", Zone: "us-east-1a", Stopped: true})
	client := fake.NewClientset()
	ctx := context.Background()
	n := controllertest.AddNode(t, client, controllertest.Node{Name: "a", ProviderID: "aws:///us-east-1a/i-0a"})
	controllertest.AddNode(t, client, controllertest.Node{Name: "b", ProviderID: "aws:///us-east-1a/i-0gone"})
	setReady(t, client, n.Name, corev1.ConditionUnknown)
	controllertest.RunController(t, client, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return New(Config{NodeMonitorPeriod: 50 * time.Millisecond}, client, f, cloud)
	})
	testutil.Eventually(t, "the shutdown taint", func() (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
		return err == nil && hasShutdownTaint(n), err
	})
	setReady(t, client, "a", corev1.ConditionTrue)
	testutil.Eventually(t, "the shutdown taint removed", func() (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
		return err == nil && !hasShutdownTaint(n), err
	})
	setReady(t, client, "a", corev1.ConditionFalse)
	cloud.Remove("i-0a")
	testutil.Eventually(t, "the node deleted", func() bool {
		_, err := client.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	testutil.Eventually(t, "the DeletingNode event", func() bool { return controllertest.HasEvent(t, client, "", "a", "DeletingNode") })
	// b is Ready: the cloud is not asked about it and it stays. Two passes that asked
	// about the NotReady node c (its instance running) prove b was looked at since.
	cloud.Put(fakecloud.Instance{ID: "i-0c", Zone: "us-east-1a"})
	controllertest.AddNode(t, client, controllertest.Node{Name: "c", ProviderID: "aws:///us-east-1a/i-0c"})
	setReady(t, client, "c", corev1.ConditionFalse)
	asked := cloud.Calls("InstanceExists")
	testutil.Eventually(t, "two more passes", func() bool { return cloud.Calls("InstanceExists") >= asked+2 })
	if _, err := client.CoreV1().Nodes().Get(ctx, "b", metav1.GetOptions{}); err != nil {
		t.Errorf("the Ready node b: %v", err)
	}
	if n, _ := client.CoreV1().Nodes().Get(ctx, "c", metav1.GetOptions{}); n == nil || hasShutdownTaint(n) {
		t.Errorf("the node of a running instance: %+v", n)
	}
}

func setReady(t *testing.T, client *fake.Clientset, name string, s corev1.ConditionStatus) {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s}}
	if _, err := client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
