package daemonset

import (
	"context"
	"fmt"
	"sort"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// podNodes lists the nodes the DaemonSet's active pods run on.
func podNodes(t *testing.T, c kubernetes.Interface, ns string) []string {
	t.Helper()
	list, err := c.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=agent"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != "" && podutils.IsPodReady(&p) {
			out = append(out, p.Spec.NodeName)
		}
	}
	sort.Strings(out)
	return out
}

func TestDaemonSetOnePodPerEligibleNode(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	c := s.Client
	ns := "ds"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*corev1.Node{
		node("node-a", map[string]string{"disk": "hdd"}),
		node("node-b", nil, corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}),
		node("node-c", map[string]string{"disk": "ssd"}),
	} {
		if _, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The scheduler's part: bind each pod to the node its affinity names.
	controllertest.RunKubelet(t, c, ns, &controllertest.Kubelet{NodeFor: targetNode})
	factory := informers.NewSharedInformerFactory(c, 0)
	ctrl, err := New(Config{}, c, factory)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	testutil.Start(t, "the daemonset controller", 0, ctrl.Run, testutil.NoWait)

	l := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent"}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: l},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}}}}}
	if _, err := c.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect := func(what string, want ...string) {
		t.Helper()
		testutil.Eventually(t, what, func() (bool, error) {
			got := podNodes(t, c, ns)
			return fmt.Sprint(got) == fmt.Sprint(want), fmt.Errorf("pods on %v, want %v", got, want)
		})
	}
	expect("pods on the untainted nodes", "node-a", "node-c")
	testutil.Eventually(t, "status", func() (bool, error) {
		got, err := c.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		st := got.Status
		return err == nil && st.DesiredNumberScheduled == 2 && st.CurrentNumberScheduled == 2 && st.NumberReady == 2 &&
			st.NumberAvailable == 2 && st.UpdatedNumberScheduled == 2 && st.ObservedGeneration == got.Generation, fmt.Errorf("%+v", st)
	})
	// Tolerating the taint adds node-b.
	patch := `{"spec":{"template":{"spec":{"tolerations":[{"key":"dedicated","operator":"Equal","value":"db","effect":"NoSchedule"}]}}}}`
	if _, err := c.AppsV1().DaemonSets(ns).Patch(ctx, "agent", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("pods on all three nodes", "node-a", "node-b", "node-c")
	testutil.Eventually(t, "rolled to the new template", func() (bool, error) {
		got, err := c.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		return err == nil && got.Status.UpdatedNumberScheduled == 3 && got.Status.NumberAvailable == 3, fmt.Errorf("%+v", got.Status)
	})
	// A nodeSelector narrows it to node-c.
	if _, err := c.AppsV1().DaemonSets(ns).Patch(ctx, "agent", types.StrategicMergePatchType, []byte(`{"spec":{"template":{"spec":{"nodeSelector":{"disk":"ssd"}}}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("pod only on node-c", "node-c")
	// A new matching node gets one.
	if _, err := c.CoreV1().Nodes().Create(ctx, node("node-d", map[string]string{"disk": "ssd"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("pods on node-c and node-d", "node-c", "node-d")
	// Relabelled, node-d loses it.
	if _, err := c.CoreV1().Nodes().Patch(ctx, "node-d", types.MergePatchType, []byte(`{"metadata":{"labels":{"disk":"hdd"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("pod only on node-c again", "node-c")
	list, _ := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && targetNode(&p) != p.Spec.NodeName {
			t.Errorf("pod %s on %s targets %s", p.Name, p.Spec.NodeName, targetNode(&p))
		}
	}
}
