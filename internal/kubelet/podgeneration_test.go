package kubelet

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

func TestObserveGeneration(t *testing.T) {
	now := metav1.Now()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	status := corev1.PodStatus{Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, ObservedGeneration: 1},
	}}
	observeGeneration(pod, &corev1.PodStatus{ObservedGeneration: 2}, &status, now)
	if status.ObservedGeneration != 3 {
		t.Errorf("observedGeneration %d, want 3", status.ObservedGeneration)
	}
	gens := map[corev1.PodConditionType]int64{}
	for _, c := range status.Conditions {
		gens[c.Type] = c.ObservedGeneration
	}
	want := map[corev1.PodConditionType]int64{corev1.PodReady: 3, corev1.DisruptionTarget: 1, corev1.PodScheduled: 3}
	for typ, g := range want {
		if got, ok := gens[typ]; !ok || got != g {
			t.Errorf("condition %s observedGeneration %d (present %v), want %d", typ, got, ok, g)
		}
	}

	// A cached pod that lags the status written before does not take it back.
	observeGeneration(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Generation: 2}}, &corev1.PodStatus{ObservedGeneration: 3}, &status, now)
	if status.ObservedGeneration != 3 {
		t.Errorf("observedGeneration after a stale pod %d, want 3", status.ObservedGeneration)
	}
}

// conditionGenerations are the observedGeneration of each of the pod's conditions.
func conditionGenerations(p *corev1.Pod) map[corev1.PodConditionType]int64 {
	out := map[corev1.PodConditionType]int64{}
	for _, c := range p.Status.Conditions {
		out[c.Type] = c.ObservedGeneration
	}
	return out
}

func TestHollowPodStatusObservesGeneration(t *testing.T) {
	api := apiservertest.Start(t, apiservertest.Options{})
	c, ctx := api.Client, context.Background()
	startKubelet(t, c, Config{NodeName: "hollow-gen", Zone: "us-east-1a", InstanceID: "i-0gen", NodeIP: "172.31.0.21"})
	if _, err := c.CoreV1().Pods("default").Create(ctx, testPod("gen", "hollow-gen"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.CoreV1().Pods("default").Delete(context.Background(), "gen", *metav1.NewDeleteOptions(0))
	})
	waitObserved := func(gen int64) {
		t.Helper()
		testutil.Eventually(t, "status observes the pod's generation", func() (bool, error) {
			p, err := c.CoreV1().Pods("default").Get(ctx, "gen", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if p.Generation != gen || p.Status.ObservedGeneration != gen {
				return false, nil
			}
			conds := conditionGenerations(p)
			for _, typ := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized,
				corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
				if g, ok := conds[typ]; !ok || g != gen {
					return false, nil
				}
			}
			return true, nil
		})
	}
	waitRunning(t, c, "gen")
	waitObserved(1)
	// Each spec change is a new generation, which the kubelet's next status reports.
	for i := int64(1); i <= 3; i++ {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p, err := c.CoreV1().Pods("default").Get(ctx, "gen", metav1.GetOptions{})
			if err != nil {
				return err
			}
			p.Spec.ActiveDeadlineSeconds = ptr.To(5000 - i)
			_, err = c.CoreV1().Pods("default").Update(ctx, p, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	waitObserved(4)
}

func conditionMessage(st corev1.PodStatus, typ corev1.PodConditionType) string {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return string(c.Status) + "/" + c.Reason + "/" + c.Message
		}
	}
	return "missing"
}

// The kubelet's status writes carry the message and the pod's generation.
func TestWriteStatusMessageAndGeneration(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "held", UID: "uid-held", Generation: 2},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app-0"}}}}
	client := fake.NewClientset(pod)
	k := &Kubelet{client: client, pods: map[string]*podState{}}
	if err := k.writeStatus(context.Background(), pod, pendingStatus(pod, "10.0.0.1", metav1.Now())); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().Pods("ns1").Get(context.Background(), "held", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m := conditionMessage(got.Status, corev1.PodReady); m != "False/ContainersNotReady/containers with unready status: [app-0]" {
		t.Errorf("Ready: %s", m)
	}
	if got.Status.ObservedGeneration != 2 {
		t.Errorf("observedGeneration %d, want 2", got.Status.ObservedGeneration)
	}
}

// TestStatusOfBoundPodStable: the status of a running pod that was created bound to the
// node (no PodScheduled from a scheduler), computed again from the status written, is
// the same status: the kubelet writes it once, not again for the conditions' order.
func TestStatusOfBoundPodStable(t *testing.T) {
	now := metav1.Now()
	pod := testPod("bound", "n1")
	pod.Generation = 1
	states := []ContainerState{{Name: "app", Image: "nginx:1.27", StartedAt: now.Time}}
	first := runtimeStatus(pod, states, "172.31.0.1", "10.244.0.2", true, now)
	observeGeneration(pod, &pod.Status, &first, now)
	pod.Status = first
	second := runtimeStatus(pod, states, "172.31.0.1", "10.244.0.2", true, now)
	observeGeneration(pod, &first, &second, now)
	if !statusEqual(&first, &second) {
		var a, b []corev1.PodConditionType
		for _, c := range first.Conditions {
			a = append(a, c.Type)
		}
		for _, c := range second.Conditions {
			b = append(b, c.Type)
		}
		t.Fatalf("the second sync's status differs from the first's (conditions %v, then %v)", a, b)
	}
}
