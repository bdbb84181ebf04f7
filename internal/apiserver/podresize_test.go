package apiserver_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// TestPodResize: pods/resize changes a running pod's container resources (PATCH and
// PUT) with a new generation and nothing else of the pod; GET reads the pod; a plain
// update still may not change resources; a resize that changes the pod's QoS class is
// invalid, and one asking for more than the node's allocatable is forbidden with the
// cause NodeCapacity (PodResizeValidator).
func TestPodResize(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	pods := s.Client.CoreV1().Pods("default")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "resize-node", Labels: map[string]string{corev1.LabelOSStable: "linux"}}}
	node, err := s.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}
	if _, err := s.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	res := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
	}
	pod, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "resized", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: "resize-node", Containers: []corev1.Container{{Name: "c1", Image: "busybox:1.37", Resources: res("20m", "35Mi")}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The node's kubelet reports the running container's resources.
	r := pod.Spec.Containers[0].Resources
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c1", Image: "busybox:1.37",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, Resources: &r, AllocatedResources: r.Requests}}
	if pod, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A patch as clients build it that also tries a label and an image: only the
	// resources are taken.
	patch := `{"metadata":{"labels":{"app":"other"}},"spec":{"containers":[{"name":"c1","image":"busybox:other","resources":{"requests":{"cpu":"25m"}}}]}}`
	var patched *corev1.Pod
	testutil.Eventually(t, "the resize patch taken (the admission's node cache filled)", func() (bool, error) {
		patched, err = pods.Patch(ctx, "resized", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "resize")
		return err == nil, nil
	})
	if q := patched.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; q.String() != "25m" || patched.Generation != pod.Generation+1 {
		t.Fatalf("after the patch: cpu %s, generation %d (was %d); want 25m and one more", q.String(), patched.Generation, pod.Generation)
	}
	if patched.Labels["app"] != "web" || patched.Spec.Containers[0].Image != "busybox:1.37" || patched.Status.Phase != corev1.PodRunning {
		t.Errorf("the subresource changed more than resources: labels %v, image %s, phase %s", patched.Labels, patched.Spec.Containers[0].Image, patched.Status.Phase)
	}

	// A plain update of the resources is refused as before.
	plain := patched.DeepCopy()
	plain.Spec.Containers[0].Resources = res("30m", "35Mi")
	if _, err := pods.Update(ctx, plain, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "pod updates may not change fields") {
		t.Errorf("plain update of resources: %v, want Invalid", err)
	}

	// PUT through the subresource (client-go's UpdateResize), then GET it: the pod.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pods.Get(ctx, "resized", metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Spec.Containers[0].Resources = res("25m", "40Mi")
		patched, err = pods.UpdateResize(ctx, "resized", p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("PUT pods/resize: %v", err)
	}
	if q := patched.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]; q.String() != "40Mi" || patched.Generation != pod.Generation+2 {
		t.Errorf("after the PUT: memory %s, generation %d; want 40Mi, %d", q.String(), patched.Generation, pod.Generation+2)
	}
	dyn := dynamic.NewForConfigOrDie(s.Config)
	got, err := dyn.Resource(corev1.SchemeGroupVersion.WithResource("pods")).Namespace("default").Get(ctx, "resized", metav1.GetOptions{}, "resize")
	if err != nil {
		t.Fatalf("GET pods/resize: %v", err)
	}
	if got.GetKind() != "Pod" || got.GetGeneration() != patched.Generation || got.GetResourceVersion() != patched.ResourceVersion {
		t.Errorf("GET pods/resize: %s generation %d rv %s; want the pod at %d %s", got.GetKind(), got.GetGeneration(), got.GetResourceVersion(),
			patched.Generation, patched.ResourceVersion)
	}

	// Limits equal to requests would make the pod Guaranteed.
	qos := `{"spec":{"containers":[{"name":"c1","resources":{"limits":{"cpu":"25m","memory":"40Mi"}}}]}}`
	if _, err := pods.Patch(ctx, "resized", types.StrategicMergePatchType, []byte(qos), metav1.PatchOptions{}, "resize"); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "Pod QOS Class may not change as a result of resizing") {
		t.Errorf("resize to another QoS class: %v, want Invalid", err)
	}
	// More cpu than the node has.
	big, _ := json.Marshal(map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c1",
		"resources": map[string]any{"requests": map[string]any{"cpu": "3"}}}}}})
	_, err = pods.Patch(ctx, "resized", types.StrategicMergePatchType, big, metav1.PatchOptions{}, "resize")
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "node didn't have enough allocatable resources: cpu, requested: 3000, allocatable: 2000") {
		t.Fatalf("resize beyond the node's allocatable: %v, want Forbidden", err)
	}
	if st := err.(apierrors.APIStatus).Status(); st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != "NodeCapacity" {
		t.Errorf("causes %+v, want one NodeCapacity", st.Details)
	}
}
