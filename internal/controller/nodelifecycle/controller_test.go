package nodelifecycle

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func boundPod(t *testing.T, c kubernetes.Interface, name string, tols []corev1.Toleration) {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: "n1", Tolerations: tols,
		Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	p, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if _, err := c.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestLeaseLapseTaintsAndEvicts(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	c := s.Client
	node, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The kubelet's lease, renewed while alive is set.
	var alive atomic.Bool
	alive.Store(true)
	lease, err := c.CoordinationV1().Leases(LeaseNamespace).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("n1"), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &metav1.MicroTime{Time: time.Now()}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	renewDone := make(chan struct{})
	go func() {
		defer close(renewDone)
		for ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			if !alive.Load() {
				continue
			}
			l, err := c.CoordinationV1().Leases(LeaseNamespace).Get(ctx, "n1", metav1.GetOptions{})
			if err != nil {
				continue
			}
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			_, _ = c.CoordinationV1().Leases(LeaseNamespace).Update(ctx, l, metav1.UpdateOptions{})
		}
	}()
	_ = lease
	// The API server gives every pod the default not-ready/unreachable tolerations (300 s,
	// upstream's DefaultTolerationSeconds admission); "plain" carries a short one instead.
	boundPod(t, c, "plain", []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](2)}})
	boundPod(t, c, "patient", []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}})
	boundPod(t, c, "hasty", []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](0)}})

	factory := informers.NewSharedInformerFactory(c, 0)
	ctrl, err := New(Config{NodeMonitorGracePeriod: 1500 * time.Millisecond, NodeMonitorPeriod: 100 * time.Millisecond, DefaultTolerationSeconds: 2}, c, factory)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; <-renewDone; factory.Shutdown() })

	getNode := func() *corev1.Node {
		n, err := c.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	deleted := func(name string) bool {
		p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return err != nil || p.DeletionTimestamp != nil
	}
	// Alive for longer than the grace period: nothing happens.
	time.Sleep(2500 * time.Millisecond)
	if r := readyCondition(getNode()); r.Status != corev1.ConditionTrue || len(getNode().Spec.Taints) != 0 {
		t.Fatalf("a node renewing its lease was marked %v, taints %v", r.Status, getNode().Spec.Taints)
	}
	// The kubelet goes silent.
	alive.Store(false)
	waitFor(t, "node Unknown with unreachable taints", func() bool {
		n := getNode()
		r := readyCondition(n)
		return r.Status == corev1.ConditionUnknown && r.Reason == "NodeStatusUnknown" && len(n.Spec.Taints) == 2 &&
			n.Spec.Taints[0].Key == corev1.TaintNodeUnreachable && n.Spec.Taints[1].Key == corev1.TaintNodeUnreachable
	})
	waitFor(t, "NodeNotReady event", func() bool {
		return nodeEvent(ctx, c, "n1", "NodeNotReady") == "Node n1 status is now: NodeNotReady"
	})
	waitFor(t, "pod marked not ready", func() bool {
		p, err := c.CoreV1().Pods("default").Get(ctx, "patient", metav1.GetOptions{})
		return err == nil && p.Status.Conditions[0].Status == corev1.ConditionFalse
	})
	waitFor(t, "the pod tolerating 0 s evicted", func() bool { return deleted("hasty") })
	if deleted("plain") {
		t.Error("a pod with a 2 s window was evicted at once")
	}
	waitFor(t, "the pod tolerating 2 s evicted after its window", func() bool { return deleted("plain") })
	if deleted("patient") {
		t.Error("a pod tolerating unreachable for ever was evicted")
	}
	waitFor(t, "TaintManagerEviction event", func() bool {
		evs, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=TaintManagerEviction"})
		return err == nil && len(evs.Items) >= 2
	})

	// Back: the kubelet renews and reports Ready; the taints go.
	alive.Store(true)
	n := getNode()
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			n.Status.Conditions[i].Status, n.Status.Conditions[i].LastHeartbeatTime = corev1.ConditionTrue, metav1.Now()
		}
	}
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "taints removed", func() bool { return len(getNode().Spec.Taints) == 0 })
	time.Sleep(2 * time.Second)
	if r := readyCondition(getNode()); r.Status != corev1.ConditionTrue {
		t.Errorf("recovered node marked %v again", r.Status)
	}
}
