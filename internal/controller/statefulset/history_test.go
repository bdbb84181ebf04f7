package statefulset

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/util/podutil"
)

// TestPartitionedRollingUpdate: the set's templates are kept in ControllerRevisions;
// a partition keeps the ordinals below it at the current revision, also when their pods
// are deleted and come back; lowering it rolls the rest, after which the update revision
// is the current one; a template set back to an earlier one reuses (and renumbers) its
// revision; a pod that fails is deleted and created again.
func TestPartitionedRollingUpdate(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	c := s.Client
	ns := "sts-canary"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.RunKubelet(t, c, ns, &controllertest.Kubelet{})
	controllertest.RunController(t, c, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return New(Config{}, c, f)
	})

	l := map[string]string{"app": "canary"}
	set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "ss2"}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To[int32](3), ServiceName: "canary", Selector: &metav1.LabelSelector{MatchLabels: l},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "web", Image: "httpd:1"}}}},
		UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](3)}},
	}}
	sets := c.AppsV1().StatefulSets(ns)
	if _, err := sets.Create(ctx, set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// state is the set once its status observed its generation, and its pods by ordinal.
	state := func() (*appsv1.StatefulSet, map[int]*corev1.Pod, error) {
		got, err := sets.Get(ctx, "ss2", metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		if got.Status.ObservedGeneration < got.Generation {
			return nil, nil, fmt.Errorf("status of generation %d, set at %d", got.Status.ObservedGeneration, got.Generation)
		}
		list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, nil, err
		}
		pods := map[int]*corev1.Pod{}
		for i := range list.Items {
			if ord, ok := ordinalOf("ss2", list.Items[i].Name); ok && list.Items[i].DeletionTimestamp == nil {
				pods[ord] = &list.Items[i]
			}
		}
		return got, pods, nil
	}
	// rolled waits for every pod to run and be ready at the revision and image its
	// ordinal should have: the update revision at and above the partition, the current
	// one below.
	var oldRev, newRev string
	rolled := func(what string, partition int, current, update func() (string, string)) *appsv1.StatefulSet {
		t.Helper()
		var last *appsv1.StatefulSet
		testutil.Eventually(t, what, func() error {
			got, pods, err := state()
			if err != nil {
				return err
			}
			for ord := range 3 {
				p := pods[ord]
				rev, image := update()
				if ord < partition {
					rev, image = current()
				}
				switch {
				case p == nil:
					return fmt.Errorf("no pod %d", ord)
				case p.Labels[RevisionHashLabel] != rev || p.Spec.Containers[0].Image != image:
					return fmt.Errorf("pod %d at %s with %s, want %s with %s", ord, p.Labels[RevisionHashLabel], p.Spec.Containers[0].Image, rev, image)
				case !podutil.IsRunningAndReady(p):
					return fmt.Errorf("pod %d not ready", ord)
				}
			}
			if got.Status.ReadyReplicas != 3 {
				return fmt.Errorf("%d ready replicas", got.Status.ReadyReplicas)
			}
			last = got
			return nil
		})
		return last
	}
	v1 := func() (string, string) { return oldRev, "httpd:1" }
	v2 := func() (string, string) { return newRev, "httpd:2" }

	testutil.Eventually(t, "the first revision", func() error {
		got, _, err := state()
		if err != nil {
			return err
		}
		if got.Status.CurrentRevision == "" || got.Status.CurrentRevision != got.Status.UpdateRevision {
			return fmt.Errorf("revisions %q, %q", got.Status.CurrentRevision, got.Status.UpdateRevision)
		}
		oldRev = got.Status.CurrentRevision
		return nil
	})
	rolled("three pods at the first revision", 3, v1, v1)
	cr, err := c.AppsV1().ControllerRevisions(ns).Get(ctx, oldRev, metav1.GetOptions{})
	if err != nil || cr.Revision != 1 || metav1.GetControllerOf(cr) == nil || cr.Labels["app"] != "canary" {
		t.Fatalf("controllerrevision %s: %+v, %v", oldRev, cr, err)
	}

	patch := func(p string) {
		t.Helper()
		if _, err := sets.Patch(ctx, "ss2", types.StrategicMergePatchType, []byte(p), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	partition := func(n int) {
		t.Helper()
		patch(fmt.Sprintf(`{"spec":{"updateStrategy":{"rollingUpdate":{"partition":%d}}}}`, n))
	}
	patch(`{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"httpd:2"}]}}}}`)
	testutil.Eventually(t, "a new update revision", func() error {
		got, _, err := state()
		if err != nil {
			return err
		}
		if got.Status.UpdateRevision == oldRev || got.Status.CurrentRevision != oldRev {
			return fmt.Errorf("revisions %q, %q", got.Status.CurrentRevision, got.Status.UpdateRevision)
		}
		newRev = got.Status.UpdateRevision
		return nil
	})
	rolled("no pod updated above the replicas' partition", 3, v1, v2)

	partition(2)
	rolled("the canary: pod 2 updated", 2, v1, v2)
	for _, name := range []string{"ss2-0", "ss2-2"} {
		if err := c.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	got := rolled("deleted pods back at their revisions: 0 at the current, 2 at the update", 2, v1, v2)
	if got.Status.CurrentReplicas != 2 || got.Status.UpdatedReplicas != 1 || got.Status.CurrentRevision != oldRev {
		t.Errorf("status during the canary: current %d at %s, updated %d", got.Status.CurrentReplicas, got.Status.CurrentRevision, got.Status.UpdatedReplicas)
	}

	partition(1)
	rolled("phase 1: pods 1 and 2 updated", 1, v1, v2)
	partition(0)
	got = rolled("phase 2: every pod updated", 0, v1, v2)
	testutil.Eventually(t, "the update revision current", func() error {
		got, _, err := state()
		if err != nil {
			return err
		}
		if got.Status.CurrentRevision != newRev || got.Status.CurrentReplicas != 3 || got.Status.UpdatedReplicas != 3 {
			return fmt.Errorf("current %d at %s, updated %d", got.Status.CurrentReplicas, got.Status.CurrentRevision, got.Status.UpdatedReplicas)
		}
		return nil
	})

	// Back to the first template: its revision again, now number 3.
	patch(`{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"httpd:1"}]}}}}`)
	oldRev, newRev = newRev, oldRev
	rolled("rolled back", 0, v2, func() (string, string) { return newRev, "httpd:1" })
	if cr, err := c.AppsV1().ControllerRevisions(ns).Get(ctx, newRev, metav1.GetOptions{}); err != nil || cr.Revision != 3 {
		t.Errorf("the first template's revision after the rollback: %+v, %v", cr, err)
	}
	revs, err := c.AppsV1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(revs.Items) != 2 {
		t.Errorf("%d controllerrevisions, want 2: %v", len(revs.Items), err)
	}

	// A pod that failed (say, rejected by its node) is replaced.
	p, err := c.CoreV1().Pods(ns).Get(ctx, "ss2-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodFailed
	p.Status.Reason = "NodePorts"
	if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the failed pod replaced", func() error {
		q, err := c.CoreV1().Pods(ns).Get(ctx, "ss2-1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if q.UID == p.UID || !podutil.IsRunningAndReady(q) {
			return fmt.Errorf("ss2-1 %s, %s", q.UID, q.Status.Phase)
		}
		return nil
	})
}
