package apiserver

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubelab/kubelab/internal/apiserver/auth"
)

// builtinNamespaces exist in every cluster from the start.
var builtinNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// bootstrap writes the bootstrap RBAC policy (auth.ReconcilePolicy), creates the
// built-in namespaces, the system PriorityClasses and the "kubernetes" Service at the
// first ClusterIP (kubernetesservice.go), through the API like any client; what exists
// already is left alone. It retries until it succeeds or ctx ends.
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
		if err := ensureSystemPriorityClasses(ctx, k.client); err != nil {
			return false, nil
		}
		return k.ensureService(ctx) == nil, nil
	})
}

// writeCatalog writes the objects that describe the API server itself: the default
// flow-control configuration and an APIService per served group version. Nothing
// waits for them, so it runs after the server is ready, retrying until it succeeds or
// ctx ends.
func writeCatalog(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, gvs [][2]string) error {
	return wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		if err := ensureFlowControlDefaults(ctx, client); err != nil {
			return false, nil
		}
		return ensureAPIServices(ctx, dyn, gvs) == nil, nil
	})
}

// waitReadyz waits until the server answers /readyz with ok: every post-start hook has
// finished and storage answers. It returns ctx's error if ctx ends first.
func waitReadyz(ctx context.Context, client kubernetes.Interface) error {
	return wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
}
