package scheduler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// defaultBinder writes the decision through pods/binding, as upstream's DefaultBinder.
type defaultBinder struct{ client kubernetes.Interface }

func (*defaultBinder) Name() string { return DefaultBinderName }

func (b *defaultBinder) Bind(ctx context.Context, _ *CycleState, pod *PodInfo, node string) *Status {
	p := pod.Pod
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	if err := b.client.CoreV1().Pods(p.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		return AsStatus(fmt.Errorf("bind %s to %s: %w", podKey(p), node, err))
	}
	return nil
}
