package serviceaccount

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Getter reads the objects a token names. uid is the uid the token holds: a cached copy
// with another uid may be stale, so implementations read the API then.
type Getter interface {
	ServiceAccount(ctx context.Context, namespace, name string, uid types.UID) (*corev1.ServiceAccount, error)
	Pod(ctx context.Context, namespace, name string, uid types.UID) (*corev1.Pod, error)
	Secret(ctx context.Context, namespace, name string, uid types.UID) (*corev1.Secret, error)
	Node(ctx context.Context, name string, uid types.UID) (*corev1.Node, error)
}

// ClusterGetter is the Getter of a running API server: informers' caches once they have
// synced, and a live GET through client before that, when the cache has no such object
// or has it with another uid.
type ClusterGetter struct {
	client          kubernetes.Interface
	serviceAccounts corelisters.ServiceAccountLister
	pods            corelisters.PodLister
	secrets         corelisters.SecretLister
	nodes           corelisters.NodeLister
	saSynced, podsSynced, secretsSynced,
	nodesSynced cache.InformerSynced
}

var _ Getter = (*ClusterGetter)(nil)

// NewClusterGetter registers the ServiceAccount, Pod, Secret and Node informers on
// factory (whoever starts factory starts them) and reads through them and client.
func NewClusterGetter(client kubernetes.Interface, factory informers.SharedInformerFactory) *ClusterGetter {
	core := factory.Core().V1()
	sa, pods, secrets, nodes := core.ServiceAccounts(), core.Pods(), core.Secrets(), core.Nodes()
	return &ClusterGetter{
		client:          client,
		serviceAccounts: sa.Lister(), pods: pods.Lister(), secrets: secrets.Lister(), nodes: nodes.Lister(),
		saSynced: sa.Informer().HasSynced, podsSynced: pods.Informer().HasSynced,
		secretsSynced: secrets.Informer().HasSynced, nodesSynced: nodes.Informer().HasSynced,
	}
}

func (g *ClusterGetter) ServiceAccount(ctx context.Context, namespace, name string, uid types.UID) (*corev1.ServiceAccount, error) {
	return lookup(ctx, g.saSynced, uid,
		func() (*corev1.ServiceAccount, error) { return g.serviceAccounts.ServiceAccounts(namespace).Get(name) },
		func(ctx context.Context) (*corev1.ServiceAccount, error) {
			return g.client.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
		})
}

func (g *ClusterGetter) Pod(ctx context.Context, namespace, name string, uid types.UID) (*corev1.Pod, error) {
	return lookup(ctx, g.podsSynced, uid,
		func() (*corev1.Pod, error) { return g.pods.Pods(namespace).Get(name) },
		func(ctx context.Context) (*corev1.Pod, error) {
			return g.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		})
}

func (g *ClusterGetter) Secret(ctx context.Context, namespace, name string, uid types.UID) (*corev1.Secret, error) {
	return lookup(ctx, g.secretsSynced, uid,
		func() (*corev1.Secret, error) { return g.secrets.Secrets(namespace).Get(name) },
		func(ctx context.Context) (*corev1.Secret, error) {
			return g.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		})
}

func (g *ClusterGetter) Node(ctx context.Context, name string, uid types.UID) (*corev1.Node, error) {
	return lookup(ctx, g.nodesSynced, uid,
		func() (*corev1.Node, error) { return g.nodes.Get(name) },
		func(ctx context.Context) (*corev1.Node, error) {
			return g.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		})
}

// lookup is the cached object when the cache has synced and holds it with uid (any uid
// when uid is empty), the live one otherwise. The returned object is shared: read only.
func lookup[T metav1.Object](ctx context.Context, synced cache.InformerSynced, uid types.UID,
	cached func() (T, error), live func(context.Context) (T, error)) (T, error) {
	if synced() {
		obj, err := cached()
		switch {
		case err == nil && (uid == "" || obj.GetUID() == uid):
			return obj, nil
		case err != nil && !apierrors.IsNotFound(err):
			return obj, err
		}
	}
	return live(ctx)
}
