package replicaset

import (
	"context"
	"fmt"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// startController runs the controller on s until the test ends.
func startController(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	controllertest.RunController(t, client, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return New(Config{}, client, f)
	})
}

func createNamespace(t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	if _, err := client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func newRS(name string, replicas int32) *appsv1.ReplicaSet {
	l := map[string]string{"app": name}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: l},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}
}

func activePods(t *testing.T, client kubernetes.Interface, ns, app string) []corev1.Pod {
	t.Helper()
	list, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if podActive(&p) {
			out = append(out, p)
		}
	}
	return out
}

// watchMaxActive follows the pods of app through a watch and reports the largest number
// of active pods seen at once.
func watchMaxActive(t *testing.T, client kubernetes.Interface, ns, app string) func() int {
	t.Helper()
	w, err := client.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	active := map[types.UID]bool{}
	most := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			mu.Lock()
			if ev.Type == watch.Deleted || !podActive(p) {
				delete(active, p.UID)
			} else {
				active[p.UID] = true
			}
			most = max(most, len(active))
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.Stop(); <-done })
	return func() int { mu.Lock(); defer mu.Unlock(); return most }
}

func TestReplicaSetScalesPodsWithOwnerReferences(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	ns := "rs-scale"
	createNamespace(t, s.Client, ns)
	controllertest.RunKubelet(t, s.Client, ns, &controllertest.Kubelet{})
	mostActive := watchMaxActive(t, s.Client, ns, "web")
	startController(t, s.Client)

	rs, err := s.Client.AppsV1().ReplicaSets(ns).Create(ctx, newRS("web", 3), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitReplicas := func(n int32) {
		t.Helper()
		testutil.Eventually(t, fmt.Sprintf("%d available replicas", n), func() (bool, error) {
			got, err := s.Client.AppsV1().ReplicaSets(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			st := got.Status
			return got.Status.ObservedGeneration == got.Generation && st.Replicas == n && st.ReadyReplicas == n &&
				st.AvailableReplicas == n && st.FullyLabeledReplicas == n && len(activePods(t, s.Client, ns, "web")) == int(n), nil
		})
	}
	waitReplicas(3)
	for _, p := range activePods(t, s.Client, ns, "web") {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.UID != rs.UID || ref.Kind != "ReplicaSet" || ref.APIVersion != "apps/v1" || ref.Name != "web" ||
			!ptr.Deref(ref.BlockOwnerDeletion, false) {
			t.Errorf("pod %s ownerReferences = %+v, want controller ReplicaSet web with blockOwnerDeletion", p.Name, p.OwnerReferences)
		}
		if p.GenerateName != "web-" {
			t.Errorf("pod %s generateName = %q, want web-", p.Name, p.GenerateName)
		}
	}
	if m := mostActive(); m > 3 {
		t.Errorf("%d active pods at once for 3 replicas", m)
	}

	scale := func(n int32) {
		t.Helper()
		// The Scale carries the ReplicaSet's resourceVersion, which status writes move on.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			sc, err := s.Client.AppsV1().ReplicaSets(ns).GetScale(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			sc.Spec.Replicas = n
			_, err = s.Client.AppsV1().ReplicaSets(ns).UpdateScale(ctx, "web", sc, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	scale(5)
	waitReplicas(5)
	if m := mostActive(); m > 5 {
		t.Errorf("%d active pods at once for 5 replicas", m)
	}
	scale(1)
	waitReplicas(1)
	testutil.Eventually(t, "scaled-down pods gone", func() (bool, error) {
		list, err := s.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 1, err
	})

	// Events as upstream, with the upstream component.
	testutil.Eventually(t, "SuccessfulCreate and SuccessfulDelete events", func() (bool, error) {
		evs, err := s.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web"})
		if err != nil {
			return false, err
		}
		seen := map[string]bool{}
		for _, e := range evs.Items {
			if e.Source.Component == ComponentName {
				seen[e.Reason] = true
			}
		}
		return seen["SuccessfulCreate"] && seen["SuccessfulDelete"], nil
	})
}

func TestReplicaSetAdoptsAndReleases(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	ns := "rs-adopt"
	createNamespace(t, s.Client, ns)
	controllertest.RunKubelet(t, s.Client, ns, &controllertest.Kubelet{})
	orphan := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}}
	if _, err := s.Client.CoreV1().Pods(ns).Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startController(t, s.Client)
	rs, err := s.Client.AppsV1().ReplicaSets(ns).Create(ctx, newRS("web", 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "orphan adopted and one more pod", func() (bool, error) {
		p, err := s.Client.CoreV1().Pods(ns).Get(ctx, "orphan", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ref := metav1.GetControllerOf(p)
		return ref != nil && ref.UID == rs.UID && len(activePods(t, s.Client, ns, "web")) == 2, nil
	})
	// Relabel the adopted pod: it is released and replaced.
	if _, err := s.Client.CoreV1().Pods(ns).Patch(ctx, "orphan", types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"debug"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "relabelled pod released and replaced", func() (bool, error) {
		p, err := s.Client.CoreV1().Pods(ns).Get(ctx, "orphan", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(p.OwnerReferences) == 0 && len(activePods(t, s.Client, ns, "web")) == 2, nil
	})
	// Labelled back, it is adopted again and the ReplicaSet, now with 3, deletes one.
	if _, err := s.Client.CoreV1().Pods(ns).Patch(ctx, "orphan", types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"web"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "readopted and scaled back to 2", func() (bool, error) {
		p, err := s.Client.CoreV1().Pods(ns).Get(ctx, "orphan", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return metav1.GetControllerOf(p) != nil && len(activePods(t, s.Client, ns, "web")) == 2, nil
	})
}
