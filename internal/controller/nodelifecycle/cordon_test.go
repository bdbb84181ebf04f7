package nodelifecycle

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// nodeEvent is the message of the event with reason about node name, or "".
func nodeEvent(ctx context.Context, c kubernetes.Interface, name, reason string) string {
	evs, err := c.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + name + ",reason=" + reason})
	if err != nil || len(evs.Items) == 0 {
		return ""
	}
	return evs.Items[0].Message
}

// The controller registers the nodes it sees (RegisteredNode), and a cordon taints the
// node node.kubernetes.io/unschedulable:NoSchedule at once, without waiting for a
// monitor pass; an uncordon takes the taint away and leaves other taints alone.
func TestCordonTaintsNode(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	c := s.Client
	node, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	factory := informers.NewSharedInformerFactory(c, 0)
	// One monitor pass at start, the next an hour later: what follows is the cordon's.
	ctrl, err := New(Config{NodeMonitorPeriod: time.Hour}, c, factory)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	testutil.Start(t, "the node lifecycle controller", 0, ctrl.Run, testutil.NoWait)

	testutil.Eventually(t, "RegisteredNode event", func() bool {
		return nodeEvent(ctx, c, "n1", "RegisteredNode") == "Node n1 event: Registered Node n1 in Controller"
	})

	setUnschedulable := func(v bool) {
		t.Helper()
		n, err := c.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Spec.Unschedulable = v
		if _, err := c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	taints := func() []corev1.Taint {
		n, err := c.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n.Spec.Taints
	}
	setUnschedulable(true)
	testutil.Eventually(t, "unschedulable taint", func() bool {
		ts := taints()
		return len(ts) == 2 && ts[0].Key == "dedicated" && ts[1].Key == corev1.TaintNodeUnschedulable && ts[1].Effect == corev1.TaintEffectNoSchedule
	})
	setUnschedulable(false)
	testutil.Eventually(t, "unschedulable taint removed", func() bool {
		ts := taints()
		return len(ts) == 1 && ts[0].Key == "dedicated"
	})
}
