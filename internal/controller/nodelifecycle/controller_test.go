package nodelifecycle

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

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
	t.Cleanup(func() { cancel(); <-renewDone; factory.Shutdown() })
	testutil.Start(t, "the node lifecycle controller", 0, ctrl.Run, testutil.NoWait)

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
	testutil.Consistently(t, 2500*time.Millisecond, "a node renewing its lease Ready and untainted", func() error {
		if n := getNode(); readyCondition(n).Status != corev1.ConditionTrue || len(n.Spec.Taints) != 0 {
			return fmt.Errorf("marked %v, taints %v", readyCondition(n).Status, n.Spec.Taints)
		}
		return nil
	})
	// The kubelet goes silent.
	alive.Store(false)
	testutil.Eventually(t, "node Unknown with unreachable taints", func() bool {
		n := getNode()
		r := readyCondition(n)
		return r.Status == corev1.ConditionUnknown && r.Reason == "NodeStatusUnknown" && len(n.Spec.Taints) == 2 &&
			n.Spec.Taints[0].Key == corev1.TaintNodeUnreachable && n.Spec.Taints[1].Key == corev1.TaintNodeUnreachable
	})
	testutil.Eventually(t, "NodeNotReady event", func() bool {
		return nodeEvent(ctx, c, "n1", "NodeNotReady") == "Node n1 status is now: NodeNotReady"
	})
	testutil.Eventually(t, "pod marked not ready", func() bool {
		p, err := c.CoreV1().Pods("default").Get(ctx, "patient", metav1.GetOptions{})
		return err == nil && p.Status.Conditions[0].Status == corev1.ConditionFalse
	})
	testutil.Eventually(t, "the pod tolerating 0 s evicted", func() bool { return deleted("hasty") })
	if deleted("plain") {
		t.Error("a pod with a 2 s window was evicted at once")
	}
	testutil.Eventually(t, "the pod tolerating 2 s evicted after its window", func() bool { return deleted("plain") })
	if deleted("patient") {
		t.Error("a pod tolerating unreachable for ever was evicted")
	}
	testutil.Eventually(t, "TaintManagerEviction event", func() bool {
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
	testutil.Eventually(t, "taints removed", func() bool { return len(getNode().Spec.Taints) == 0 })
	testutil.Consistently(t, 2*time.Second, "the recovered node Ready", func() error {
		if r := readyCondition(getNode()); r.Status != corev1.ConditionTrue {
			return fmt.Errorf("marked %v again", r.Status)
		}
		return nil
	})
}
