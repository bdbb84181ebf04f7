package kubelet

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubelab/kubelab/internal/testutil"
)

// TestSharedEventsWriteWithTheSourceNodesClient: kubelets sharing one broadcaster each
// record with their node as source, and each event is created with the client of the
// kubelet whose node it names, not another's; a stopped kubelet's events are dropped.
func TestSharedEventsWriteWithTheSourceNodesClient(t *testing.T) {
	s := NewSharedEvents()
	t.Cleanup(s.Shutdown)
	a, b := fake.NewClientset(), fake.NewClientset()
	s.start("node-a", a)
	s.start("node-b", b)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}}
	s.recorder("node-a").Event(pod, corev1.EventTypeNormal, "Started", "Started container app")
	s.recorder("node-b").Event(pod, corev1.EventTypeNormal, "Pulled", "Container image already present")

	created := func(c *fake.Clientset) []*corev1.Event {
		var out []*corev1.Event
		for _, act := range c.Actions() {
			if ca, ok := act.(k8stesting.CreateAction); ok && act.GetResource().Resource == "events" {
				out = append(out, ca.GetObject().(*corev1.Event))
			}
		}
		return out
	}
	testutil.Eventually(t, "each node's event created with its client", func() bool {
		return len(created(a)) == 1 && len(created(b)) == 1
	})
	if e := created(a)[0]; e.Source.Host != "node-a" || e.Reason != "Started" {
		t.Fatalf("node-a's client created %s from %s, want Started from node-a", e.Reason, e.Source.Host)
	}
	if e := created(b)[0]; e.Source.Host != "node-b" || e.Reason != "Pulled" {
		t.Fatalf("node-b's client created %s from %s, want Pulled from node-b", e.Reason, e.Source.Host)
	}

	// A stopped kubelet's client writes nothing more.
	s.stop("node-a")
	s.recorder("node-a").Event(pod, corev1.EventTypeNormal, "Killing", "Stopping container app")
	s.recorder("node-b").Event(pod, corev1.EventTypeNormal, "Created", "Created container app")
	testutil.Eventually(t, "node-b's second event", func() bool { return len(created(b)) == 2 })
	if n := len(created(a)); n != 1 {
		t.Fatalf("node-a's client created %d events after its kubelet stopped, want 1 in all", n)
	}
}
