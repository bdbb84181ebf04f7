package replication

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

const ns = "default"

// newClient is a fake clientset holding objs that, as the API server does, names pods
// created with generateName and moves resourceVersion on every create and update.
func newClient(objs ...runtime.Object) *fake.Clientset {
	client := fake.NewClientset(objs...)
	var n, rv atomic.Int64
	rv.Store(1000)
	bump := func(a k8stesting.Action) (bool, runtime.Object, error) {
		var obj runtime.Object
		switch a := a.(type) {
		case k8stesting.CreateAction:
			obj = a.GetObject()
		case k8stesting.UpdateAction:
			obj = a.GetObject()
		}
		if m, err := meta.Accessor(obj); err == nil {
			m.SetResourceVersion(strconv.FormatInt(rv.Add(1), 10))
		}
		return false, nil, nil
	}
	client.PrependReactor("create", "*", bump)
	client.PrependReactor("update", "*", bump)
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		if pod.Name == "" && pod.GenerateName != "" {
			pod.Name = fmt.Sprintf("%s%05d", pod.GenerateName, n.Add(1))
			pod.UID = types.UID("pod-" + pod.Name)
		}
		return false, nil, nil
	})
	return client
}

func start(t *testing.T, client *fake.Clientset) {
	t.Helper()
	controllertest.RunController(t, client, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return New(Config{}, client, f)
	})
}

func newRC(name string, replicas int32) *corev1.ReplicationController {
	l := map[string]string{"app": name}
	return &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: "rc-uid-web", Generation: 1},
		Spec: corev1.ReplicationControllerSpec{
			Replicas: ptr.To(replicas),
			Selector: l,
			Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}
}

func pods(t *testing.T, client *fake.Clientset) []corev1.Pod {
	t.Helper()
	list, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func getRC(t *testing.T, client *fake.Clientset) *corev1.ReplicationController {
	t.Helper()
	rc, err := client.CoreV1().ReplicationControllers(ns).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

func TestReplicationControllerCreatesAndDeletesPods(t *testing.T) {
	ctx := context.Background()
	client := newClient(newRC("web", 3))
	start(t, client)

	testutil.Eventually(t, "3 pods and status.replicas 3", func() (bool, error) {
		rc := getRC(t, client)
		return len(pods(t, client)) == 3 && rc.Status.Replicas == 3 && rc.Status.ObservedGeneration == 1, nil
	})
	for _, p := range pods(t, client) {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.APIVersion != "v1" || ref.Kind != "ReplicationController" || ref.Name != "web" ||
			ref.UID != "rc-uid-web" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
			t.Errorf("pod %s ownerReferences = %+v, want controller v1 ReplicationController web", p.Name, p.OwnerReferences)
		}
		if p.GenerateName != "web-" || p.Labels["app"] != "web" {
			t.Errorf("pod %s: generateName %q labels %v", p.Name, p.GenerateName, p.Labels)
		}
	}
	// The status went through replicationcontrollers/status.
	statusWrites := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "update" && a.GetResource().Resource == "replicationcontrollers" {
			if a.GetSubresource() != "status" {
				t.Errorf("update of replicationcontrollers/%s, want only status", a.GetSubresource())
			}
			statusWrites++
		}
	}
	if statusWrites == 0 {
		t.Error("no replicationcontrollers/status update")
	}

	// Ready pods are counted.
	for _, p := range pods(t, client) {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, &p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, "3 ready and available replicas", func() (bool, error) {
		st := getRC(t, client).Status
		return st.ReadyReplicas == 3 && st.AvailableReplicas == 3 && st.FullyLabeledReplicas == 3, nil
	})

	rc := getRC(t, client)
	rc.Spec.Replicas = ptr.To[int32](1)
	rc.Generation = 2
	if _, err := client.CoreV1().ReplicationControllers(ns).Update(ctx, rc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "scaled down to 1", func() (bool, error) {
		rc := getRC(t, client)
		return len(pods(t, client)) == 1 && rc.Status.Replicas == 1 && rc.Status.ObservedGeneration == 2, nil
	})

	testutil.Eventually(t, "Events about the ReplicationController", func() (bool, error) {
		seen := map[string]bool{}
		for _, e := range controllertest.EventsAbout(t, client, ns, "web") {
			if e.Source.Component != ComponentName || e.InvolvedObject.Kind != "ReplicationController" || e.InvolvedObject.APIVersion != "v1" {
				return false, fmt.Errorf("event %s from %q about %s %s", e.Reason, e.Source.Component, e.InvolvedObject.APIVersion, e.InvolvedObject.Kind)
			}
			seen[e.Reason] = true
		}
		return seen["SuccessfulCreate"] && seen["SuccessfulDelete"], nil
	})
}

func TestReplicationControllerAdoptsAndReleases(t *testing.T) {
	ctx := context.Background()
	orphan := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: ns, UID: "orphan-uid", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}}
	// A pod of a ReplicaSet with the same labels is not the ReplicationController's.
	other := orphan.DeepCopy()
	other.Name, other.UID = "of-a-replicaset", "other-uid"
	other.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs-uid", Controller: ptr.To(true)}}
	client := newClient(newRC("web", 2), orphan, other)
	start(t, client)

	testutil.Eventually(t, "orphan adopted and one pod created", func() (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "orphan", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ref := metav1.GetControllerOf(p)
		return ref != nil && ref.Kind == "ReplicationController" && ref.UID == "rc-uid-web" && len(pods(t, client)) == 3, nil
	})
	if p, _ := client.CoreV1().Pods(ns).Get(ctx, "of-a-replicaset", metav1.GetOptions{}); metav1.GetControllerOf(p).Kind != "ReplicaSet" {
		t.Errorf("the ReplicaSet's pod changed hands: %+v", p.OwnerReferences)
	}

	// Relabelled, the adopted pod is released and replaced.
	p, err := client.CoreV1().Pods(ns).Get(ctx, "orphan", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Labels = map[string]string{"app": "debug"}
	if _, err := client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "relabelled pod released and replaced", func() (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "orphan", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		owned := 0
		for _, q := range pods(t, client) {
			if ref := metav1.GetControllerOf(&q); ref != nil && ref.Kind == "ReplicationController" {
				owned++
			}
		}
		return len(p.OwnerReferences) == 0 && owned == 2, nil
	})
}
