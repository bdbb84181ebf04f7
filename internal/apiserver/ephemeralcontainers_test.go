package apiserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/dynamic"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

// TestEphemeralContainers: pods/ephemeralcontainers reads a pod and adds ephemeral
// containers to it (PATCH and PUT), defaulted as containers are, with a new generation;
// nothing else of the pod changes through it; existing ephemeral containers are never
// removed or changed; invalid ones are refused with kube-apiserver's causes; and neither
// create nor a pod update sets them.
func TestEphemeralContainers(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	pods := s.Client.CoreV1().Pods("default")
	base := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "target", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox:1.37", Command: []string{"sleep", "1000"}}}}}

	withEC := base.DeepCopy()
	withEC.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: "busybox"}}}
	if _, err := pods.Create(ctx, withEC, metav1.CreateOptions{}); !hasCause(err, metav1.CauseTypeForbidden, "spec.ephemeralContainers") {
		t.Errorf("create with ephemeral containers: %v, want Forbidden spec.ephemeralContainers", err)
	}
	pod, err := pods.Create(ctx, base, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// A strategic merge patch as clients build it, which also tries to change a label and
	// an image: only the ephemeral container is taken.
	before, _ := json.Marshal(pod)
	after := pod.DeepCopy()
	after.Labels["app"] = "other"
	after.Spec.Containers[0].Image = "busybox:other"
	after.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "debugger", Image: "busybox:1.37", Command: []string{"sh", "-c", "echo polo"}, Stdin: true, TTY: true},
		TargetContainerName: "app"}}
	afterJSON, _ := json.Marshal(after)
	patch, err := strategicpatch.CreateTwoWayMergePatch(before, afterJSON, pod)
	if err != nil {
		t.Fatal(err)
	}
	patched, err := pods.Patch(ctx, "target", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "ephemeralcontainers")
	if err != nil {
		t.Fatalf("patch pods/ephemeralcontainers: %v", err)
	}
	if len(patched.Spec.EphemeralContainers) != 1 || patched.Generation != pod.Generation+1 {
		t.Fatalf("after the patch: %d ephemeral containers, generation %d (was %d); want 1 and one more", len(patched.Spec.EphemeralContainers), patched.Generation, pod.Generation)
	}
	if ec := patched.Spec.EphemeralContainers[0]; ec.TerminationMessagePolicy != corev1.TerminationMessageReadFile ||
		ec.TerminationMessagePath != corev1.TerminationMessagePathDefault || ec.ImagePullPolicy != corev1.PullIfNotPresent || ec.TargetContainerName != "app" {
		t.Errorf("ephemeral container not defaulted as a container is: %+v", ec)
	}
	if patched.Labels["app"] != "web" || patched.Spec.Containers[0].Image != "busybox:1.37" {
		t.Errorf("the subresource changed more than ephemeral containers: labels %v, image %s", patched.Labels, patched.Spec.Containers[0].Image)
	}

	dyn := dynamic.NewForConfigOrDie(s.Config)
	got, err := dyn.Resource(corev1.SchemeGroupVersion.WithResource("pods")).Namespace("default").Get(ctx, "target", metav1.GetOptions{}, "ephemeralcontainers")
	if err != nil {
		t.Fatalf("GET pods/ephemeralcontainers: %v", err)
	}
	if ecs, _, _ := unstructured.NestedSlice(got.Object, "spec", "ephemeralContainers"); len(ecs) != 1 || got.GetKind() != "Pod" {
		t.Errorf("GET pods/ephemeralcontainers: kind %s, %d ephemeral containers; want Pod and 1", got.GetKind(), len(ecs))
	}

	// PUT adds a second one.
	second := patched.DeepCopy()
	second.Spec.EphemeralContainers = append(second.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "debugger2", Image: "busybox:1.37", ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile}})
	updated, err := pods.UpdateEphemeralContainers(ctx, "target", second, metav1.UpdateOptions{})
	if err != nil || len(updated.Spec.EphemeralContainers) != 2 || updated.Generation != patched.Generation+1 {
		t.Fatalf("PUT pods/ephemeralcontainers: %v", err)
	}

	for _, c := range []struct {
		what    string
		change  func(*corev1.Pod)
		typ     metav1.CauseType
		field   string
		message string
	}{
		{"removing one", func(p *corev1.Pod) { p.Spec.EphemeralContainers = p.Spec.EphemeralContainers[:1] },
			metav1.CauseTypeForbidden, "spec.ephemeralContainers", `existing ephemeral containers "debugger2" may not be removed`},
		{"changing one", func(p *corev1.Pod) { p.Spec.EphemeralContainers[0].Image = "busybox:other" },
			metav1.CauseTypeForbidden, "spec.ephemeralContainers", `existing ephemeral containers "debugger" may not be changed`},
		{"a name an app container has", addEC(corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "app", Image: "busybox"}}),
			metav1.CauseTypeFieldValueDuplicate, "spec.ephemeralContainers[2].name", ""},
		{"ports", addEC(corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "d3", Image: "busybox",
			Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}}}}),
			metav1.CauseTypeForbidden, "spec.ephemeralContainers[2].ports", "cannot be set for an Ephemeral Container"},
		{"a lifecycle hook", addEC(corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "d3", Image: "busybox",
			Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}}}),
			metav1.CauseTypeForbidden, "spec.ephemeralContainers[2].lifecycle", "cannot be set for an Ephemeral Container"},
		{"an unknown target", addEC(corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "d3", Image: "busybox"},
			TargetContainerName: "debugger"}),
			metav1.CauseTypeFieldValueNotFound, "spec.ephemeralContainers[2].targetContainerName", ""},
		{"no image", addEC(corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "d3"}}),
			metav1.CauseTypeFieldValueRequired, "spec.ephemeralContainers[2].image", ""},
	} {
		p := updated.DeepCopy()
		c.change(p)
		_, err := pods.UpdateEphemeralContainers(ctx, "target", p, metav1.UpdateOptions{})
		if !hasCause(err, c.typ, c.field) || !strings.Contains(err.Error(), c.message) {
			t.Errorf("%s: %v, want %s %s %q", c.what, err, c.typ, c.field, c.message)
		}
	}

	// The pod itself does not change its ephemeral containers.
	p := updated.DeepCopy()
	p.Spec.EphemeralContainers = p.Spec.EphemeralContainers[:1]
	if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("a pod update removing an ephemeral container: %v, want Invalid", err)
	}
	p = updated.DeepCopy()
	p.Labels["app"] = "relabelled"
	if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Errorf("a pod update keeping its ephemeral containers: %v", err)
	}
}

func addEC(ec corev1.EphemeralContainer) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, ec) }
}

// hasCause says whether err is an API status with a cause of type typ on field.
func hasCause(err error, typ metav1.CauseType, field string) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Details == nil {
		return false
	}
	for _, c := range st.Status().Details.Causes {
		if c.Type == typ && c.Field == field {
			return true
		}
	}
	return false
}
