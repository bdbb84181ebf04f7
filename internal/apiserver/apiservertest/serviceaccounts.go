package apiservertest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// keepDefaultServiceAccounts creates the "default" ServiceAccount of every active
// namespace that lacks it, until the server stops, as the controller-manager's
// serviceaccount controller does in a cluster: the API server refuses pods whose
// account does not exist, and tests of the API server alone create pods.
func (s *Server) keepDefaultServiceAccounts(t testing.TB) {
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(s.Client, 0)
	ensure := func(obj any) {
		ns, ok := obj.(*corev1.Namespace)
		if !ok || ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating {
			return
		}
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns.Name}}
		_, err := s.Client.CoreV1().ServiceAccounts(ns.Name).Create(ctx, sa, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsNotFound(err) &&
			!apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) && ctx.Err() == nil {
			t.Logf("create the default service account of %s: %v", ns.Name, err)
		}
	}
	if _, err := factory.Core().V1().Namespaces().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: ensure, UpdateFunc: func(_, obj any) { ensure(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	stop := func() { cancel(); factory.Shutdown() }
	t.Cleanup(stop)
	serverStop := s.stop
	s.stop = func() { stop(); serverStop() }
}
