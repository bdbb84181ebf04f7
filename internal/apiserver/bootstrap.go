package apiserver

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubelab/kubelab/internal/apiserver/auth"
)

// builtinNamespaces exist in every cluster from the start.
var builtinNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// bootstrap writes the bootstrap RBAC policy (auth.ReconcilePolicy), creates the
// built-in namespaces and the "kubernetes" Service at the first ClusterIP
// (kubernetesservice.go), through the API like any client; what exists already is left
// alone. It retries until it succeeds or ctx ends.
func bootstrap(ctx context.Context, k *kubernetesService) error {
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := auth.ReconcilePolicy(ctx, k.client); err != nil {
			k.log.InfoContext(ctx, "bootstrap RBAC policy not written yet", "err", err)
			return false, nil
		}
		for _, name := range builtinNamespaces {
			_, err := k.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return false, nil
			}
		}
		return k.ensureService(ctx) == nil, nil
	})
}
