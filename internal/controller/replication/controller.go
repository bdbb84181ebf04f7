package replication

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/kubelab/kubelab/internal/controller/replicaset"
)

// ComponentName is the source of the controller's Events, as upstream.
const ComponentName = "replication-controller"

// Config tunes the controller: workers, burst and clock, as for ReplicaSets.
type Config = replicaset.Config

// New registers the controller's informers (ReplicationControllers and Pods) and
// handlers on factory; the caller starts the factory after every New.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory) (*replicaset.Controller, error) {
	inf := factory.Core().V1().ReplicationControllers()
	c, err := replicaset.NewFor(cfg, client, factory.Core().V1().Pods(), replicaset.Workload{
		Kind:      corev1.SchemeGroupVersion.WithKind("ReplicationController"),
		Component: ComponentName,
		QueueName: "replicationmanager",
		Informer:  inf.Informer(),
		Objects:   controllers{lister: inf.Lister(), client: client},
	})
	if err != nil {
		return nil, fmt.Errorf("replication controller: %w", err)
	}
	return c, nil
}

// controllers are the ReplicationControllers, read and written as ReplicaSets.
type controllers struct {
	lister corelisters.ReplicationControllerLister
	client kubernetes.Interface
}

func (c controllers) Get(namespace, name string) (*appsv1.ReplicaSet, error) {
	rc, err := c.lister.ReplicationControllers(namespace).Get(name)
	if err != nil {
		return nil, err
	}
	return toReplicaSet(rc), nil
}

func (c controllers) List(namespace string) ([]*appsv1.ReplicaSet, error) {
	list, err := c.lister.ReplicationControllers(namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make([]*appsv1.ReplicaSet, len(list))
	for i, rc := range list {
		out[i] = toReplicaSet(rc)
	}
	return out, nil
}

func (c controllers) GetLive(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error) {
	rc, err := c.client.CoreV1().ReplicationControllers(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return toReplicaSet(rc), nil
}

func (c controllers) UpdateStatus(ctx context.Context, rs *appsv1.ReplicaSet) error {
	_, err := c.client.CoreV1().ReplicationControllers(rs.Namespace).UpdateStatus(ctx, toReplicationController(rs), metav1.UpdateOptions{})
	return err
}
