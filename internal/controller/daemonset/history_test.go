package daemonset

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/polymorphichelpers"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

func revisionsOf(t *testing.T, c kubernetes.Interface, ns string) []appsv1.ControllerRevision {
	t.Helper()
	list, err := c.AppsV1().ControllerRevisions(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=agent"})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Revision < list.Items[j].Revision })
	return list.Items
}

// agentPods are the DaemonSet's pods that are not being deleted, by name.
func agentPods(t *testing.T, c kubernetes.Interface, ns string) map[string]corev1.Pod {
	t.Helper()
	list, err := c.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=agent"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.Pod{}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p
		}
	}
	return out
}

// A DaemonSet keeps its history in ControllerRevisions as upstream's does: kubectl
// lists them, and a rollback through one in the middle of a stuck rollout replaces only
// the pods of the new template; the others are not restarted.
func TestRevisionsAndRollback(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	c := s.Client
	const ns = "ds-history"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"node-a", "node-b", "node-c"} {
		if _, err := c.CoreV1().Nodes().Create(ctx, node(name, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Pods of the image that does not exist never become ready.
	controllertest.RunKubelet(t, c, ns, &controllertest.Kubelet{NodeFor: targetNode,
		Hold: func(p *corev1.Pod) bool { return p.Spec.Containers[0].Image == "foo:non-existent" }})
	factory := informers.NewSharedInformerFactory(c, 0)
	ctrl, err := New(Config{}, c, factory)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	testutil.Start(t, "the daemonset controller", 0, ctrl.Run, testutil.NoWait)

	l := map[string]string{"app": "agent"}
	ds, err := c.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent",
		Annotations: map[string]string{"kubernetes.io/change-cause": "first"}}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: l},
		UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1))}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	allReady := func(image string) func() (bool, error) {
		return func() (bool, error) {
			pods := agentPods(t, c, ns)
			var bad []string
			for name, p := range pods {
				if p.Spec.Containers[0].Image != image || !podutils.IsPodReady(&p) {
					bad = append(bad, name)
				}
			}
			return len(pods) == 3 && len(bad) == 0, fmt.Errorf("%d pods, not ready on %s: %v", len(pods), image, bad)
		}
	}
	testutil.Eventually(t, "three ready pods", allReady("agent:1"))

	// One revision, named by the hash the pods carry, as kubectl and the e2e framework
	// read it.
	revs := revisionsOf(t, c, ns)
	if len(revs) != 1 {
		t.Fatalf("%d revisions, want 1", len(revs))
	}
	first := revs[0]
	hash := first.Labels[RevisionHashLabel]
	if ref := metav1.GetControllerOf(&first); ref == nil || ref.UID != ds.UID || first.Name != "agent-"+hash || first.Revision != 1 ||
		first.Annotations["kubernetes.io/change-cause"] != "first" {
		t.Errorf("revision %s: owner %v revision %d annotations %v", first.Name, first.OwnerReferences, first.Revision, first.Annotations)
	}
	current, _ := c.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
	if ok, err := matches(current, &first); !ok || err != nil {
		t.Errorf("the revision does not hold the DaemonSet's template: %v", err)
	}
	before := agentPods(t, c, ns)
	for name, p := range before {
		if p.Labels[RevisionHashLabel] != hash || p.Labels[TemplateGenerationLabel] != "1" {
			t.Errorf("pod %s labels %v, want hash %s and template generation 1", name, p.Labels, hash)
		}
	}

	// A rollout to an image that never runs: a second revision, and it gets stuck
	// after replacing one pod.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := c.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Annotations["kubernetes.io/change-cause"] = "second"
		d.Spec.Template.Spec.Containers[0].Image = "foo:non-existent"
		_, err = c.AppsV1().DaemonSets(ns).Update(ctx, d, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "a pod of the new template", func() (bool, error) {
		for _, p := range agentPods(t, c, ns) {
			if p.Spec.Containers[0].Image == "foo:non-existent" {
				return true, nil
			}
		}
		return false, nil
	})
	revs = revisionsOf(t, c, ns)
	if len(revs) != 2 || revs[1].Revision != 2 || revs[1].Labels[RevisionHashLabel] == hash {
		t.Fatalf("revisions after the update: %+v", revs)
	}
	viewer, err := polymorphichelpers.HistoryViewerFor(schema.GroupKind{Group: "apps", Kind: "DaemonSet"}, c)
	if err != nil {
		t.Fatal(err)
	}
	listed, err := viewer.ViewHistory(ns, "agent", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(listed, "1         first") || !strings.Contains(listed, "2         second") {
		t.Errorf("kubectl rollout history:\n%s", listed)
	}
	untouched := map[string]bool{}
	for name, p := range agentPods(t, c, ns) {
		if _, ok := before[name]; ok && p.Spec.Containers[0].Image == "agent:1" {
			untouched[name] = true
		}
	}
	if len(untouched) != 2 {
		t.Fatalf("%d old pods left in the stuck rollout, want 2", len(untouched))
	}

	// kubectl rollout undo --to-revision=1 patches the template back from the revision.
	rollbacker, err := polymorphichelpers.RollbackerFor(schema.GroupKind{Group: "apps", Kind: "DaemonSet"}, c)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := c.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
	if _, err := rollbacker.Rollback(d, nil, 1, cmdutil.DryRunNone); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "rolled back", allReady("agent:1"))
	after := agentPods(t, c, ns)
	for name := range untouched {
		if _, ok := after[name]; !ok {
			t.Errorf("pod %s restarted by the rollback", name)
		}
	}
	// The first revision is the current one again, renumbered above the second.
	testutil.Eventually(t, "the first revision renumbered", func() (bool, error) {
		revs := revisionsOf(t, c, ns)
		var got []string
		for _, r := range revs {
			got = append(got, fmt.Sprintf("%s=%d", r.Labels[RevisionHashLabel], r.Revision))
		}
		return len(revs) == 2 && revs[1].Name == first.Name && revs[1].Revision == 3, fmt.Errorf("revisions %v", got)
	})
	testutil.Eventually(t, "status of the rolled back DaemonSet", func() (bool, error) {
		got, err := c.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		st := got.Status
		return err == nil && st.UpdatedNumberScheduled == 3 && st.NumberAvailable == 3 && st.ObservedGeneration == got.Generation, fmt.Errorf("%+v", st)
	})
}
