package garbagecollector

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

type env struct {
	t      *testing.T
	client kubernetes.Interface
	ns     string
}

func start(t *testing.T, ns string) *env {
	t.Helper()
	s := apiservertest.Start(t, apiservertest.Options{})
	md, err := metadata.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	gc, err := New(Config{DiscoveryPeriod: time.Second}, s.Client.Discovery(), md)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	if _, err := s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, client: s.Client, ns: ns}
}

func (e *env) configMap(name string, finalizers []string, owners ...metav1.OwnerReference) *corev1.ConfigMap {
	e.t.Helper()
	cm, err := e.client.CoreV1().ConfigMaps(e.ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: finalizers, OwnerReferences: owners}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return cm
}

func (e *env) pod(name string, owners ...metav1.OwnerReference) *corev1.Pod {
	e.t.Helper()
	p, err := e.client.CoreV1().Pods(e.ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: owners},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func owns(o metav1.Object, kind string, block bool) metav1.OwnerReference {
	apiVersion := "v1"
	if kind == "ClusterRole" {
		apiVersion = "rbac.authorization.k8s.io/v1"
	}
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: o.GetName(), UID: o.GetUID(), BlockOwnerDeletion: ptr.To(block)}
}

func (e *env) delete(name string, policy metav1.DeletionPropagation) {
	e.t.Helper()
	if err := e.client.CoreV1().ConfigMaps(e.ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) getCM(name string) (*corev1.ConfigMap, error) {
	return e.client.CoreV1().ConfigMaps(e.ns).Get(context.Background(), name, metav1.GetOptions{})
}

func (e *env) waitGone(what string, get func() error) {
	e.t.Helper()
	e.waitFor(what+" gone", func() bool { return apierrors.IsNotFound(get()) })
}

func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		e.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// never checks for a while that cond stays false.
func (e *env) never(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if cond() {
			e.t.Fatalf("%s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestBackgroundDeletion(t *testing.T) {
	e := start(t, "gc-background")
	ctx := context.Background()
	owner := e.configMap("owner", nil)
	e.configMap("dep", nil, owns(owner, "ConfigMap", true))
	e.pod("dep-pod", owns(owner, "ConfigMap", false))
	other := e.configMap("other-owner", nil)
	e.configMap("shared", nil, owns(owner, "ConfigMap", true), owns(other, "ConfigMap", false))
	// A dependent whose owner never existed goes too.
	e.configMap("dangling", nil, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "ghost", UID: types.UID("00000000-0000-0000-0000-000000000001")})
	e.waitGone("dependent of an owner that never existed", func() error { _, err := e.getCM("dangling"); return err })

	e.never("a dependent with a live owner was deleted", func() bool { _, err := e.getCM("dep"); return err != nil })
	e.delete("owner", metav1.DeletePropagationBackground)
	e.waitGone("owner", func() error { _, err := e.getCM("owner"); return err })
	e.waitGone("dependent configmap", func() error { _, err := e.getCM("dep"); return err })
	e.waitGone("dependent pod", func() error {
		_, err := e.client.CoreV1().Pods(e.ns).Get(ctx, "dep-pod", metav1.GetOptions{})
		return err
	})
	e.waitFor("shared dependent to lose the reference to the deleted owner", func() bool {
		cm, err := e.getCM("shared")
		return err == nil && len(cm.OwnerReferences) == 1 && cm.OwnerReferences[0].UID == other.UID
	})
}

func TestForegroundDeletion(t *testing.T) {
	e := start(t, "gc-foreground")
	owner := e.configMap("owner", nil)
	// mid is owned by owner and owns leaf; leaf is held by a finalizer of its own.
	mid := e.configMap("mid", nil, owns(owner, "ConfigMap", true))
	e.configMap("leaf", []string{"example.com/hold"}, owns(mid, "ConfigMap", true))
	e.configMap("nonblocking", nil, owns(owner, "ConfigMap", false))

	e.delete("owner", metav1.DeletePropagationForeground)
	e.waitFor("leaf marked for deletion, mid deleted in the foreground", func() bool {
		leaf, err := e.getCM("leaf")
		if err != nil || leaf.DeletionTimestamp == nil {
			return false
		}
		m, err := e.getCM("mid")
		return err == nil && m.DeletionTimestamp != nil && hasString(m.Finalizers, metav1.FinalizerDeleteDependents)
	})
	e.waitGone("non-blocking dependent", func() error { _, err := e.getCM("nonblocking"); return err })
	// While leaf stays, mid and owner wait, marked with foregroundDeletion.
	e.never("owner went before its blocking dependents", func() bool {
		o, err := e.getCM("owner")
		return err != nil || o.DeletionTimestamp == nil || !hasString(o.Finalizers, metav1.FinalizerDeleteDependents)
	})
	leaf, _ := e.getCM("leaf")
	leaf.Finalizers = nil
	if _, err := e.client.CoreV1().ConfigMaps(e.ns).Update(context.Background(), leaf, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("leaf", func() error { _, err := e.getCM("leaf"); return err })
	e.waitGone("mid", func() error { _, err := e.getCM("mid"); return err })
	e.waitGone("owner", func() error { _, err := e.getCM("owner"); return err })
}

func TestOrphanDeletion(t *testing.T) {
	e := start(t, "gc-orphan")
	owner := e.configMap("owner", nil)
	e.configMap("dep1", nil, owns(owner, "ConfigMap", true))
	e.pod("dep-pod", owns(owner, "ConfigMap", true))
	e.delete("owner", metav1.DeletePropagationOrphan)
	e.waitGone("owner", func() error { _, err := e.getCM("owner"); return err })
	cm, err := e.getCM("dep1")
	if err != nil {
		t.Fatalf("orphaned dependent: %v", err)
	}
	if len(cm.OwnerReferences) != 0 {
		t.Errorf("orphaned dependent still has %v", cm.OwnerReferences)
	}
	p, err := e.client.CoreV1().Pods(e.ns).Get(context.Background(), "dep-pod", metav1.GetOptions{})
	if err != nil || len(p.OwnerReferences) != 0 {
		t.Errorf("orphaned pod: %v, owners %v", err, p.OwnerReferences)
	}
	e.never("an orphan was collected", func() bool { _, err := e.getCM("dep1"); return err != nil })
}

func TestClusterScopedOwner(t *testing.T) {
	e := start(t, "gc-cluster")
	ctx := context.Background()
	cr, err := e.client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "gc-owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.configMap("dep", nil, owns(cr, "ClusterRole", true))
	e.never("dependent of a live cluster-scoped owner deleted", func() bool { _, err := e.getCM("dep"); return err != nil })
	if err := e.client.RbacV1().ClusterRoles().Delete(ctx, "gc-owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("dependent of the cluster-scoped owner", func() error { _, err := e.getCM("dep"); return err })
}
