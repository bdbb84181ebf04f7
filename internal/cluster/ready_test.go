package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The add-on's pods count once Running and Ready, not terminating: the controller, a node
// plugin on every node, and no pod of theirs left unready (a rollout under way).
func TestAddonPodsWaiting(t *testing.T) {
	pod := func(name, app, node string, ready bool) corev1.Pod {
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: corev1.PodRunning,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}}}
	}
	terminating := func(p corev1.Pod) corev1.Pod {
		p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		return p
	}
	nodes := []string{"n1", "n2"}
	ctrl, n1, n2 := pod("ctrl-a", appCSIController, "n1", true), pod("node-a", appCSINode, "n1", true), pod("node-b", appCSINode, "n2", true)
	for _, c := range []struct {
		name string
		pods []corev1.Pod
		want string // "" or a part of what is still awaited
	}{
		{"all ready", []corev1.Pod{ctrl, n1, n2}, ""},
		{"none yet", nil, "no Ready ebs-csi-controller pod; no Ready ebs-csi-node pod on n1; no Ready ebs-csi-node pod on n2"},
		{"a node plugin not ready", []corev1.Pod{ctrl, n1, pod("node-b", appCSINode, "n2", false)}, "no Ready ebs-csi-node pod on n2; not Ready: node-b"},
		{"only a terminating controller", []corev1.Pod{terminating(ctrl), n1, n2}, "no Ready ebs-csi-controller pod"},
		{"a new controller pod not ready yet", []corev1.Pod{ctrl, pod("ctrl-b", appCSIController, "n2", false), n1, n2}, "not Ready: ctrl-b"},
		{"an old one going", []corev1.Pod{terminating(pod("ctrl-old", appCSIController, "n1", false)), ctrl, n1, n2}, ""},
		{"pending", []corev1.Pod{ctrl, n1, {ObjectMeta: metav1.ObjectMeta{Name: "node-b", Labels: map[string]string{"app": appCSINode}},
			Spec: corev1.PodSpec{NodeName: "n2"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}}, "no Ready ebs-csi-node pod on n2; not Ready: node-b"},
	} {
		ptrs := make([]*corev1.Pod, len(c.pods))
		for i := range c.pods {
			ptrs[i] = &c.pods[i]
		}
		got := addonPodsWaiting(ptrs, nodes)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: waiting for %q, want %q", c.name, got, c.want)
		}
	}
}

// waitFor names what it waited for and what was missing when it gives up, and returns
// as soon as nothing is.
func TestWaitFor(t *testing.T) {
	ctx := context.Background()
	n := 0
	if err := waitFor(ctx, "thing", time.Millisecond, time.Minute, func(context.Context) string {
		if n++; n < 3 {
			return "not yet"
		}
		return ""
	}); err != nil || n != 3 {
		t.Errorf("waitFor: %v after %d checks, want nil after 3", err, n)
	}
	err := waitFor(ctx, "the default ServiceAccount", time.Millisecond, 20*time.Millisecond, func(context.Context) string {
		return `serviceaccounts "default" not found`
	})
	if err == nil || !strings.Contains(err.Error(), `the default ServiceAccount not ready after 20ms (serviceaccounts "default" not found)`) {
		t.Errorf("waitFor timing out: %v", err)
	}
}

// Beyond ten nodes without their plugin pod, the wait names ten and counts the rest; and
// a wait on every node grows with thousands of them.
func TestAddonPodsWaitingManyNodes(t *testing.T) {
	var nodes []string
	for i := range 25 {
		nodes = append(nodes, "n"+strings.Repeat("x", i))
	}
	got := addonPodsWaiting(nil, nodes)
	if strings.Count(got, "no Ready ebs-csi-node pod on") != 10 || !strings.Contains(got, "nor on 15 more nodes") {
		t.Fatalf("waiting for %q: want ten nodes named and 15 more counted", got)
	}
	if w := nodesWait(2*time.Minute, 100); w != 2*time.Minute {
		t.Errorf("100 nodes: %v, want 2m", w)
	}
	if w := nodesWait(2*time.Minute, 5000); w != 250*time.Second {
		t.Errorf("5000 nodes: %v, want 250s", w)
	}
}
