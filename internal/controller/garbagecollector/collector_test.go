package garbagecollector

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
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
	testutil.Start(t, "the garbage collector", 0, gc.Run, testutil.NoWait)
	if _, err := s.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
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
	testutil.Eventually(e.t, what+" gone", func() bool { return apierrors.IsNotFound(get()) })
}

// holdWindow is how long a test holds that the collector leaves something alone.
const holdWindow = 1500 * time.Millisecond

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

	testutil.Consistently(t, holdWindow, "a dependent with a live owner kept", func() error { _, err := e.getCM("dep"); return err })
	e.delete("owner", metav1.DeletePropagationBackground)
	e.waitGone("owner", func() error { _, err := e.getCM("owner"); return err })
	e.waitGone("dependent configmap", func() error { _, err := e.getCM("dep"); return err })
	e.waitGone("dependent pod", func() error {
		_, err := e.client.CoreV1().Pods(e.ns).Get(ctx, "dep-pod", metav1.GetOptions{})
		return err
	})
	testutil.Eventually(t, "shared dependent to lose the reference to the deleted owner", func() bool {
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
	testutil.Eventually(t, "leaf marked for deletion, mid deleted in the foreground", func() bool {
		leaf, err := e.getCM("leaf")
		if err != nil || leaf.DeletionTimestamp == nil {
			return false
		}
		m, err := e.getCM("mid")
		return err == nil && m.DeletionTimestamp != nil && hasString(m.Finalizers, metav1.FinalizerDeleteDependents)
	})
	e.waitGone("non-blocking dependent", func() error { _, err := e.getCM("nonblocking"); return err })
	// While leaf stays, mid and owner wait, marked with foregroundDeletion.
	testutil.Consistently(t, holdWindow, "the owner waiting for its blocking dependents", func() error {
		o, err := e.getCM("owner")
		if err == nil && (o.DeletionTimestamp == nil || !hasString(o.Finalizers, metav1.FinalizerDeleteDependents)) {
			err = fmt.Errorf("owner deletion %v, finalizers %v", o.DeletionTimestamp, o.Finalizers)
		}
		return err
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
	testutil.Consistently(t, holdWindow, "the orphan kept", func() error { _, err := e.getCM("dep1"); return err })
}

func TestClusterScopedOwner(t *testing.T) {
	e := start(t, "gc-cluster")
	ctx := context.Background()
	cr, err := e.client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "gc-owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.configMap("dep", nil, owns(cr, "ClusterRole", true))
	testutil.Consistently(t, holdWindow, "the dependent of a live cluster-scoped owner kept", func() error { _, err := e.getCM("dep"); return err })
	if err := e.client.RbacV1().ClusterRoles().Delete(ctx, "gc-owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("dependent of the cluster-scoped owner", func() error { _, err := e.getCM("dep"); return err })
}
