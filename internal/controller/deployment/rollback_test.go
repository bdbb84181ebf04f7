package deployment

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/util/retry"
	"k8s.io/kubectl/pkg/polymorphichelpers"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/controller/garbagecollector"
	"github.com/kubelab/kubelab/internal/controller/replicaset"
	"github.com/kubelab/kubelab/internal/testutil"
)

// cluster is an API server with the deployment, replicaset and garbage-collector
// controllers, and a test kubelet for namespace ns.
func cluster(t *testing.T, ns string) kubernetes.Interface {
	t.Helper()
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(s.Client, 0)
	dc, err := New(Config{}, s.Client, factory)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := replicaset.New(replicaset.Config{}, s.Client, factory)
	if err != nil {
		t.Fatal(err)
	}
	md, err := metadata.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	gc, err := garbagecollector.New(garbagecollector.Config{}, s.Client.Discovery(), md)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{dc.Run, rc.Run, gc.Run} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(ctx); err != nil {
				t.Errorf("controller: %v", err)
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait(); factory.Shutdown() })
	controllertest.RunKubelet(t, s.Client, ns, &controllertest.Kubelet{ReadyAfter: 300 * time.Millisecond})
	return s.Client
}

func newDeployment(name string, replicas int32, image string) *appsv1.Deployment {
	l := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: l},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: image}}},
			},
		},
	}
}

// rolloutStatus is what `kubectl rollout status deployment/name` says.
func rolloutStatus(t *testing.T, c kubernetes.Interface, ns, name string) (string, bool, error) {
	d, err := c.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return "", false, err
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		return "", false, err
	}
	return (&polymorphichelpers.DeploymentStatusViewer{}).Status(&unstructured.Unstructured{Object: u}, 0)
}

func waitRolledOut(t *testing.T, c kubernetes.Interface, ns, name string) {
	t.Helper()
	testutil.EventuallyWithin(t, 60*time.Second, "rollout of "+name, func() (bool, error) {
		msg, done, err := rolloutStatus(t, c, ns, name)
		if err != nil {
			return false, err
		}
		if !done {
			return false, fmt.Errorf("rollout status: %s", msg)
		}
		return true, nil
	})
}

func replicaSets(t *testing.T, c kubernetes.Interface, ns, app string) []appsv1.ReplicaSet {
	t.Helper()
	list, err := c.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func activePods(t *testing.T, c kubernetes.Interface, ns, app string) []corev1.Pod {
	t.Helper()
	list, err := c.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// podWatch follows the pods of app through a watch: how many are available (Ready and
// not terminating) and how many active, at the fewest and the most.
type podWatch struct {
	mu                  sync.Mutex
	available, active   map[types.UID]*corev1.Pod
	minAvail, maxActive int
	armed               bool
	mixed               bool // pods of two templates active at once
}

func watchPods(t *testing.T, c kubernetes.Interface, ns, app string) *podWatch {
	t.Helper()
	w, err := c.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	pw := &podWatch{available: map[types.UID]*corev1.Pod{}, active: map[types.UID]*corev1.Pod{}, minAvail: 1 << 30}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			pw.mu.Lock()
			delete(pw.available, p.UID)
			delete(pw.active, p.UID)
			if ev.Type != watch.Deleted && p.DeletionTimestamp == nil {
				pw.active[p.UID] = p
				if podIsReady(p) {
					pw.available[p.UID] = p
				}
			}
			if pw.armed {
				pw.minAvail = min(pw.minAvail, len(pw.available))
				pw.maxActive = max(pw.maxActive, len(pw.active))
				hashes := map[string]bool{}
				for _, a := range pw.active {
					hashes[a.Labels[PodTemplateHashLabel]] = true
				}
				pw.mixed = pw.mixed || len(hashes) > 1
			}
			pw.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.Stop(); <-done })
	return pw
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// arm starts recording from now.
func (pw *podWatch) arm() {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	pw.armed, pw.minAvail, pw.maxActive, pw.mixed = true, len(pw.available), len(pw.active), false
}

func (pw *podWatch) stats() (minAvail, maxActive int, mixed bool) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	return pw.minAvail, pw.maxActive, pw.mixed
}

func setImage(t *testing.T, c kubernetes.Interface, ns, name, image string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":%q,"image":%q}]}}}}`, name, image)
	if _, err := c.AppsV1().Deployments(ns).Patch(context.Background(), name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// scaleTo sets the replicas through the scale subresource. The Scale carries the
// Deployment's resourceVersion, which the controller's status writes move on, so a
// conflict is read again and retried, as a client must.
func scaleTo(t *testing.T, c kubernetes.Interface, ns, name string, n int32) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sc, err := c.AppsV1().Deployments(ns).GetScale(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		sc.Spec.Replicas = n
		_, err = c.AppsV1().Deployments(ns).UpdateScale(context.Background(), name, sc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDeploymentScalesRollsBackAndTrimsHistory: a Deployment of 3 gets a ReplicaSet and pods with
// ownerReferences; scale to 5 and to 1; a rolling image update keeps availability;
// rollback re-uses the old ReplicaSet; history is trimmed; deleting the Deployment
// garbage-collects the ReplicaSets and pods.
func TestDeploymentScalesRollsBackAndTrimsHistory(t *testing.T) {
	ns := "rollback"
	c := cluster(t, ns)
	ctx := context.Background()
	pw := watchPods(t, c, ns, "web")
	d, err := c.AppsV1().Deployments(ns).Create(ctx, newDeployment("web", 3, "nginx:1.27"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, c, ns, "web")

	// One ReplicaSet web-<hash>, controlled by the Deployment, with revision 1.
	rss := replicaSets(t, c, ns, "web")
	if len(rss) != 1 {
		t.Fatalf("%d ReplicaSets, want 1", len(rss))
	}
	rs := rss[0]
	hash := rs.Labels[PodTemplateHashLabel]
	if hash == "" || rs.Name != "web-"+hash || rs.Spec.Selector.MatchLabels[PodTemplateHashLabel] != hash || rs.Spec.Template.Labels[PodTemplateHashLabel] != hash {
		t.Errorf("ReplicaSet %s: labels %v, selector %v", rs.Name, rs.Labels, rs.Spec.Selector)
	}
	if ref := metav1.GetControllerOf(&rs); ref == nil || ref.UID != d.UID || ref.Kind != "Deployment" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("ReplicaSet ownerReferences = %+v", rs.OwnerReferences)
	}
	if rs.Annotations[RevisionAnnotation] != "1" || rs.Annotations[DesiredReplicasAnnotation] != "3" || rs.Annotations[MaxReplicasAnnotation] != "4" {
		t.Errorf("ReplicaSet annotations = %v", rs.Annotations)
	}
	pods := activePods(t, c, ns, "web")
	if len(pods) != 3 {
		t.Fatalf("%d pods, want 3", len(pods))
	}
	for _, p := range pods {
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != rs.UID || ref.Kind != "ReplicaSet" {
			t.Errorf("pod %s ownerReferences = %+v", p.Name, p.OwnerReferences)
		}
		if p.Labels[PodTemplateHashLabel] != hash {
			t.Errorf("pod %s labels = %v", p.Name, p.Labels)
		}
	}
	got, _ := c.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if got.Annotations[RevisionAnnotation] != "1" || got.Status.ObservedGeneration != got.Generation {
		t.Errorf("deployment revision %q, observedGeneration %d of %d", got.Annotations[RevisionAnnotation], got.Status.ObservedGeneration, got.Generation)
	}
	conds := map[appsv1.DeploymentConditionType]string{}
	for _, cond := range got.Status.Conditions {
		conds[cond.Type] = string(cond.Status) + "/" + cond.Reason
	}
	if conds[appsv1.DeploymentAvailable] != "True/"+ReasonMinimumAvailable || conds[appsv1.DeploymentProgressing] != "True/"+ReasonNewRSAvailable {
		t.Errorf("conditions = %v", conds)
	}

	// Scale to 5, then to 1.
	for _, n := range []int32{5, 1} {
		scaleTo(t, c, ns, "web", n)
		waitRolledOut(t, c, ns, "web")
		testutil.EventuallyWithin(t, 60*time.Second, fmt.Sprintf("%d pods", n), func() (bool, error) { return len(activePods(t, c, ns, "web")) == int(n), nil })
		if rss := replicaSets(t, c, ns, "web"); len(rss) != 1 || *rss[0].Spec.Replicas != n {
			t.Errorf("after scaling to %d: %d ReplicaSets", n, len(rss))
		}
	}

	// A rolling image update at 4 replicas (maxSurge 1, maxUnavailable 1): never fewer
	// than 3 available, never more than 5 active.
	scaleTo(t, c, ns, "web", 4)
	waitRolledOut(t, c, ns, "web")
	testutil.EventuallyWithin(t, 60*time.Second, "4 ready pods", func() (bool, error) { return len(activePods(t, c, ns, "web")) == 4, nil })
	pw.arm()
	setImage(t, c, ns, "web", "nginx:1.28")
	waitRolledOut(t, c, ns, "web")
	minAvail, maxActive, _ := pw.stats()
	if minAvail < 3 {
		t.Errorf("rolling update left %d available pods, below replicas-maxUnavailable = 3", minAvail)
	}
	if maxActive > 5 {
		t.Errorf("rolling update ran %d pods at once, above replicas+maxSurge = 5", maxActive)
	}
	t.Logf("rolling update: at least %d available, at most %d active", minAvail, maxActive)
	rss = replicaSets(t, c, ns, "web")
	if len(rss) != 2 {
		t.Fatalf("%d ReplicaSets after the update, want 2", len(rss))
	}
	revisions := map[string]string{}
	for _, r := range rss {
		revisions[r.Name] = r.Annotations[RevisionAnnotation]
		if r.Name == rs.Name && *r.Spec.Replicas != 0 {
			t.Errorf("old ReplicaSet still has %d replicas", *r.Spec.Replicas)
		}
	}
	if revisions[rs.Name] != "1" || len(revisions) != 2 {
		t.Errorf("revisions = %v", revisions)
	}
	for _, p := range activePods(t, c, ns, "web") {
		if p.Spec.Containers[0].Image != "nginx:1.28" {
			t.Errorf("pod %s runs %s after the update", p.Name, p.Spec.Containers[0].Image)
		}
	}
	testutil.EventuallyWithin(t, 60*time.Second, "ScalingReplicaSet events", func() (bool, error) {
		evs, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web,reason=ScalingReplicaSet"})
		return err == nil && len(evs.Items) >= 3, err
	})

	// Rollback (kubectl rollout undo re-applies the old template): the first
	// ReplicaSet is new again, with revision 3 and 1 in its history.
	setImage(t, c, ns, "web", "nginx:1.27")
	waitRolledOut(t, c, ns, "web")
	testutil.EventuallyWithin(t, 60*time.Second, "rollback to the first ReplicaSet", func() (bool, error) {
		r, err := c.AppsV1().ReplicaSets(ns).Get(ctx, rs.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		dep, err := c.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return r.Annotations[RevisionAnnotation] == "3" && r.Annotations[RevisionHistoryAnnotation] == "1" && *r.Spec.Replicas == 4 &&
			dep.Annotations[RevisionAnnotation] == "3", nil
	})
	if n := len(replicaSets(t, c, ns, "web")); n != 2 {
		t.Errorf("%d ReplicaSets after rollback, want 2 (no new one)", n)
	}

	// History: with revisionHistoryLimit 1, a third template leaves one old ReplicaSet.
	if _, err := c.AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"revisionHistoryLimit":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	setImage(t, c, ns, "web", "nginx:1.29")
	waitRolledOut(t, c, ns, "web")
	testutil.EventuallyWithin(t, 60*time.Second, "history trimmed to 1", func() (bool, error) { return len(replicaSets(t, c, ns, "web")) == 2, nil })

	// Deleting the Deployment garbage-collects its ReplicaSets and pods.
	if err := c.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 60*time.Second, "ReplicaSets and pods collected", func() (bool, error) {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return len(replicaSets(t, c, ns, "web")) == 0 && len(pods.Items) == 0, nil
	})
}

func TestRecreateAndForegroundDeletion(t *testing.T) {
	ns := "recreate"
	c := cluster(t, ns)
	ctx := context.Background()
	pw := watchPods(t, c, ns, "db")
	d := newDeployment("db", 2, "postgres:16")
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	if _, err := c.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, c, ns, "db")
	pw.arm()
	setImage(t, c, ns, "db", "postgres:17")
	waitRolledOut(t, c, ns, "db")
	if _, _, mixed := pw.stats(); mixed {
		t.Error("Recreate ran old and new pods at the same time")
	}
	for _, p := range activePods(t, c, ns, "db") {
		if p.Spec.Containers[0].Image != "postgres:17" {
			t.Errorf("pod %s runs %s", p.Name, p.Spec.Containers[0].Image)
		}
	}
	// Foreground: the Deployment stays (with foregroundDeletion) until its ReplicaSets
	// and their pods are gone.
	fg := metav1.DeletePropagationForeground
	if err := c.AppsV1().Deployments(ns).Delete(ctx, "db", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		t.Fatal(err)
	}
	dep, err := c.AppsV1().Deployments(ns).Get(ctx, "db", metav1.GetOptions{})
	if err == nil && (dep.DeletionTimestamp == nil || len(dep.Finalizers) == 0 || dep.Finalizers[0] != metav1.FinalizerDeleteDependents) {
		t.Errorf("deployment being deleted in the foreground: finalizers %v", dep.Finalizers)
	}
	early := false
	testutil.EventuallyWithin(t, 60*time.Second, "deployment, ReplicaSets and pods gone", func() (bool, error) {
		_, err := c.AppsV1().Deployments(ns).Get(ctx, "db", metav1.GetOptions{})
		pods, perr := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if perr != nil {
			return false, perr
		}
		if apierrors.IsNotFound(err) && (len(pods.Items) > 0 || len(replicaSets(t, c, ns, "db")) > 0) {
			early = true
		}
		return apierrors.IsNotFound(err), nil
	})
	if early {
		t.Error("the deployment went before its dependents in a foreground deletion")
	}
	if pods, _ := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); len(pods.Items) != 0 || len(replicaSets(t, c, ns, "db")) != 0 {
		t.Errorf("foreground deletion left %d pods", len(pods.Items))
	}
}
