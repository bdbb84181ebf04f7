package replicaset

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
)

// Workload is a kind of object whose pods a Controller keeps: ReplicaSets, or another
// kind with the same spec and status (ReplicationControllers) that Objects presents as
// ReplicaSets.
type Workload struct {
	// Kind is the kind the pods' controller ownerReferences and the Events name.
	Kind schema.GroupVersionKind
	// Component is the source of the Events.
	Component string
	// QueueName names the work queue.
	QueueName string
	// Informer informs of the objects; its handlers only need their keys.
	Informer cache.SharedIndexInformer
	// Objects reads and writes them as ReplicaSets.
	Objects Objects
}

// Objects reads and writes the objects of a Workload as ReplicaSets. What Get and List
// return is read-only.
type Objects interface {
	// Get reads one object from the informer's cache.
	Get(namespace, name string) (*appsv1.ReplicaSet, error)
	// List reads the objects of a namespace from the informer's cache.
	List(namespace string) ([]*appsv1.ReplicaSet, error)
	// GetLive reads one object from the API server.
	GetLive(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error)
	// UpdateStatus writes rs.Status through the status subresource.
	UpdateStatus(ctx context.Context, rs *appsv1.ReplicaSet) error
}

// replicaSetWorkload is the ReplicaSets of factory, written through client.
func replicaSetWorkload(client kubernetes.Interface, factory informers.SharedInformerFactory) Workload {
	inf := factory.Apps().V1().ReplicaSets()
	return Workload{
		Kind:      appsv1.SchemeGroupVersion.WithKind("ReplicaSet"),
		Component: ComponentName,
		QueueName: "replicaset",
		Informer:  inf.Informer(),
		Objects:   replicaSets{lister: inf.Lister(), client: client},
	}
}

type replicaSets struct {
	lister appslisters.ReplicaSetLister
	client kubernetes.Interface
}

func (r replicaSets) Get(namespace, name string) (*appsv1.ReplicaSet, error) {
	return r.lister.ReplicaSets(namespace).Get(name)
}

func (r replicaSets) List(namespace string) ([]*appsv1.ReplicaSet, error) {
	return r.lister.ReplicaSets(namespace).List(labels.Everything())
}

func (r replicaSets) GetLive(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error) {
	return r.client.AppsV1().ReplicaSets(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (r replicaSets) UpdateStatus(ctx context.Context, rs *appsv1.ReplicaSet) error {
	_, err := r.client.AppsV1().ReplicaSets(rs.Namespace).UpdateStatus(ctx, rs, metav1.UpdateOptions{})
	return err
}

// reference is what the Events about rs name: rs under the workload's kind.
func (c *Controller) reference(rs *appsv1.ReplicaSet) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: c.workload.Kind.GroupVersion().String(), Kind: c.workload.Kind.Kind,
		Namespace: rs.Namespace, Name: rs.Name, UID: rs.UID, ResourceVersion: rs.ResourceVersion,
	}
}
