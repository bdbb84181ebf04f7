package controllertest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubelab/kubelab/internal/util/worker"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Kubelet plays the scheduler and the kubelet for the pods of one namespace: it binds
// each new pod to a node through pods/binding, after ReadyAfter reports it Running and
// Ready with a pod IP through pods/status, and completes deletions with a grace-0
// delete.
type Kubelet struct {
	Nodes      []string
	ReadyAfter time.Duration
	// Hold, when it returns true for a pod, keeps it Pending (not ready).
	Hold func(*corev1.Pod) bool
	// NodeFor picks the node of a pod (round robin over Nodes when nil or "").
	NodeFor func(*corev1.Pod) string

	next atomic.Int64
}

// RunKubelet starts k on the pods of namespace ns (Nodes defaults to node-a, node-b,
// node-c) and stops it, waiting for its loop to end, in t.Cleanup.
func RunKubelet(t testing.TB, client kubernetes.Interface, ns string, k *Kubelet) {
	t.Helper()
	if len(k.Nodes) == 0 {
		k.Nodes = []string{"node-a", "node-b", "node-c"}
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o interface{}) { key, _ := cache.MetaNamespaceKeyFunc(o); q.Add(key) },
		UpdateFunc: func(_, o interface{}) { key, _ := cache.MetaNamespaceKeyFunc(o); q.Add(key) },
	})
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		worker.Work(ctx, q, func(ctx context.Context, key string) error {
			obj, exists, _ := inf.GetStore().GetByKey(key)
			if !exists {
				return nil
			}
			if again := k.handle(ctx, client, obj.(*corev1.Pod)); again > 0 {
				return worker.RequeueAfter(again)
			}
			return nil
		}, func(context.Context, string, error) {})
	}()
	t.Cleanup(func() {
		cancel()
		q.ShutDown()
		<-done
	})
}

// handle moves pod one step; it returns how soon to look again (0: on its next event).
func (k *Kubelet) handle(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod) time.Duration {
	pods := client.CoreV1().Pods(pod.Namespace)
	switch {
	case pod.DeletionTimestamp != nil:
		if pod.Spec.NodeName != "" {
			err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return 100 * time.Millisecond
			}
		}
	case pod.Spec.NodeName == "":
		n := k.next.Add(1)
		node := k.Nodes[int(n)%len(k.Nodes)]
		if k.NodeFor != nil && k.NodeFor(pod) != "" {
			node = k.NodeFor(pod)
		}
		err := pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, UID: pod.UID},
			Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return 100 * time.Millisecond
		}
	case pod.Status.Phase == "" || pod.Status.Phase == corev1.PodPending:
		if k.Hold != nil && k.Hold(pod) {
			return 200 * time.Millisecond
		}
		created := pod.CreationTimestamp.Time
		if wait := time.Until(created.Add(k.ReadyAfter)); wait > 0 && k.ReadyAfter > 0 {
			return wait
		}
		p := pod.DeepCopy()
		now := metav1.Now()
		p.Status.Phase = corev1.PodRunning
		ip := k.next.Add(1)
		p.Status.PodIP = fmt.Sprintf("10.244.%d.%d", ip/250, ip%250+2)
		p.Status.PodIPs = []corev1.PodIP{{IP: p.Status.PodIP}}
		p.Status.StartTime = &now
		p.Status.Conditions = append(p.Status.Conditions,
			corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now})
		for _, c := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true,
				Started: new(bool), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
		}
		if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return 100 * time.Millisecond
		}
	}
	return 0
}
