package kubelet

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func conditionMessage(st corev1.PodStatus, typ corev1.PodConditionType) string {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return string(c.Status) + "/" + c.Reason + "/" + c.Message
		}
	}
	return "missing"
}

// A pod held back (its volumes not ready) is not Ready for its containers, which the
// condition's message names: sidecars and app containers, not plain init containers.
func TestUnreadyMessage(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "held"}, Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "setup"}, {Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
		Containers:     []corev1.Container{{Name: "app-0"}, {Name: "app-1"}},
	}}
	st := pendingStatus(pod, "10.0.0.1", metav1.Now())
	unreadyMessage(pod, &st)
	want := "False/ContainersNotReady/containers with unready status: [proxy app-0 app-1]"
	for _, typ := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
		if got := conditionMessage(st, typ); got != want {
			t.Errorf("%s: %s, want %s", typ, got, want)
		}
	}

	// One ready, one not: only the one; a container the status lacks is unknown.
	st = corev1.PodStatus{
		ContainerStatuses:     []corev1.ContainerStatus{{Name: "app-0", Ready: true}},
		Conditions:            []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: reasonContainersNotReady}},
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "proxy"}},
	}
	unreadyMessage(pod, &st)
	if got := conditionMessage(st, corev1.PodReady); got != "False/ContainersNotReady/containers with unknown status: [app-1], containers with unready status: [proxy]" {
		t.Errorf("Ready: %s", got)
	}

	// A message already given, or a condition that is True, is left alone.
	st.Conditions = []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: reasonContainersNotReady, Message: "given"},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
	}
	unreadyMessage(pod, &st)
	if got := conditionMessage(st, corev1.PodReady) + " " + conditionMessage(st, corev1.ContainersReady); got != "False/ContainersNotReady/given True//" {
		t.Errorf("conditions: %s", got)
	}
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
