package podgc

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func pod(name, node string, phase corev1.PodPhase, created time.Time) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: k8stypes.UID("uid-" + name), CreationTimestamp: metav1.NewTime(created)},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
}

func TestOrphans(t *testing.T) {
	pods := []*corev1.Pod{pod("a", "here", corev1.PodRunning, t0), pod("b", "gone", corev1.PodRunning, t0), pod("c", "", corev1.PodPending, t0)}
	nodes := map[string]bool{"here": true}
	missing := map[string]time.Time{}
	if got := orphans(pods, nodes, missing, t0, 40*time.Second); len(got) != 0 {
		t.Errorf("first sight: %d orphans, want none (quarantine)", len(got))
	}
	if got := orphans(pods, nodes, missing, t0.Add(39*time.Second), 40*time.Second); len(got) != 0 {
		t.Errorf("within the quarantine: %d orphans", len(got))
	}
	if got := orphans(pods, nodes, missing, t0.Add(40*time.Second), 40*time.Second); len(got) != 1 || got[0].Name != "b" {
		t.Errorf("after the quarantine: %v, want b", got)
	}
	// A node that comes back is forgotten: its quarantine starts over.
	nodes["gone"] = true
	orphans(pods, nodes, missing, t0.Add(41*time.Second), 40*time.Second)
	if _, ok := missing["gone"]; ok {
		t.Error("a node seen again is still remembered missing")
	}
}

func TestExcessTerminated(t *testing.T) {
	pods := []*corev1.Pod{pod("new", "n", corev1.PodSucceeded, t0.Add(time.Hour)), pod("old", "n", corev1.PodFailed, t0),
		pod("running", "n", corev1.PodRunning, t0)}
	if got := excessTerminated(pods, 1); len(got) != 1 || got[0].Name != "old" {
		t.Errorf("excess %v, want the old one", got)
	}
	if got := excessTerminated(pods, 2); got != nil {
		t.Errorf("within the threshold: %v", got)
	}
	if got := excessTerminated(pods, -1); got != nil {
		t.Errorf("threshold off: %v", got)
	}
}

// TestCollects: a pod of a deleted node is marked Failed (DisruptionTarget, DeletionByPodGC)
// and deleted at once after the quarantine; a terminating pod never scheduled is deleted;
// the pod of a node that exists stays.
func TestCollects(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	now := metav1.NewTime(t0)
	unscheduled := pod("unscheduled", "", corev1.PodPending, t0)
	unscheduled.DeletionTimestamp, unscheduled.Finalizers = &now, nil
	client := fake.NewClientset(pod("kept", "here", corev1.PodRunning, t0), pod("orphan", "gone", corev1.PodRunning, t0), unscheduled)
	controllertest.AddNode(t, client, controllertest.Node{Name: "here"})
	controllertest.RunController(t, client, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return New(Config{Clock: clk}, client, f)
	})
	ctx := context.Background()
	gone := func(name string) func() bool {
		return func() bool {
			_, err := client.CoreV1().Pods("ns").Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}
	}
	testutil.Eventually(t, "the unscheduled terminating pod deleted", gone("unscheduled"))
	// Each step of the clock is a pass; the orphan goes once 40 s have passed.
	testutil.Eventually(t, "the orphan deleted", func() bool {
		if !clk.HasWaiters() {
			return false
		}
		clk.Step(20 * time.Second)
		return gone("orphan")()
	})
	var marked bool
	for _, a := range client.Actions() {
		if pa, ok := a.(clienttesting.PatchAction); ok && a.GetSubresource() == "status" && pa.GetName() == "orphan" {
			marked = true
			var body struct {
				Status corev1.PodStatus `json:"status"`
			}
			if err := json.Unmarshal(pa.GetPatch(), &body); err != nil || body.Status.Phase != corev1.PodFailed ||
				len(body.Status.Conditions) != 1 || body.Status.Conditions[0].Type != corev1.DisruptionTarget || body.Status.Conditions[0].Reason != "DeletionByPodGC" {
				t.Errorf("the orphan's status patch %s (%v)", pa.GetPatch(), err)
			}
		}
		if d, ok := a.(clienttesting.DeleteAction); ok && d.GetName() == "orphan" && !marked {
			t.Error("the orphan was deleted before it was marked Failed with DisruptionTarget")
		}
	}
	if !marked {
		t.Error("the orphan was never marked Failed with DisruptionTarget")
	}
	if _, err := client.CoreV1().Pods("ns").Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("the pod of an existing node: %v", err)
	}
}
