package admission

import (
	"context"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// warnings collects what a plugin tells the client.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) AddWarning(_, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) all() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.list, "\n")
}

func privilegedPod(ns string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "x", Image: "busybox", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}}}
}

func createAttrs(obj runtime.Object, ns, name string, gvk schema.GroupVersionKind, resource string) admission.Attributes {
	return admission.NewAttributesRecord(obj, nil, gvk, ns, name, gvk.GroupVersion().WithResource(resource), "",
		admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "alice"})
}

func TestPodSecurity(t *testing.T) {
	nsWith := func(name string, labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	client := fake.NewClientset(
		nsWith("open", nil),
		nsWith("strict", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}),
		nsWith("warned", map[string]string{"pod-security.kubernetes.io/warn": "baseline"}),
	)
	factory := informers.NewSharedInformerFactory(client, 0)
	p, err := newPodSecurity(factory, client)
	if err != nil {
		t.Fatal(err)
	}
	p.SetReadyFunc(func() bool { return true })
	podKind := corev1.SchemeGroupVersion.WithKind("Pod")

	t.Run("privileged by default", func(t *testing.T) {
		if err := p.Validate(context.Background(), createAttrs(privilegedPod("open"), "open", "p", podKind, "pods"), nil); err != nil {
			t.Errorf("privileged pod in an unlabeled namespace refused: %v", err)
		}
	})
	t.Run("enforce restricted", func(t *testing.T) {
		err := p.Validate(context.Background(), createAttrs(privilegedPod("strict"), "strict", "p", podKind, "pods"), nil)
		if !apierrors.IsForbidden(err) {
			t.Fatalf("privileged pod under restricted: %v, want forbidden", err)
		}
		want := `pods "p" is forbidden: violates PodSecurity "restricted:latest": privileged (container "x" must not set securityContext.privileged=true), `
		if !strings.HasPrefix(err.Error(), want) {
			t.Errorf("message\n got %s\nwant prefix %s", err, want)
		}
	})
	t.Run("warn baseline", func(t *testing.T) {
		w := &warnings{}
		ctx := warning.WithWarningRecorder(context.Background(), w)
		if err := p.Validate(ctx, createAttrs(privilegedPod("warned"), "warned", "p", podKind, "pods"), nil); err != nil {
			t.Fatalf("warn-only namespace refused the pod: %v", err)
		}
		if got := w.all(); !strings.Contains(got, `would violate PodSecurity "baseline:latest": privileged (container "x" must not set securityContext.privileged=true)`) {
			t.Errorf("warnings %q", got)
		}
	})
	t.Run("deployments are warned, not refused", func(t *testing.T) {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "strict"},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: privilegedPod("strict").Spec}}}
		w := &warnings{}
		ctx := warning.WithWarningRecorder(context.Background(), w)
		if err := p.Validate(ctx, createAttrs(d, "strict", "d", appsv1.SchemeGroupVersion.WithKind("Deployment"), "deployments"), nil); err != nil {
			t.Fatalf("deployment refused: %v", err)
		}
		if got := w.all(); !strings.Contains(got, `would violate PodSecurity "restricted:latest"`) {
			t.Errorf("warnings %q", got)
		}
	})
	t.Run("invalid label refused", func(t *testing.T) {
		ns := nsWith("bad", map[string]string{"pod-security.kubernetes.io/enforce": "strictest"})
		err := p.Validate(context.Background(), createAttrs(ns, "", "bad", corev1.SchemeGroupVersion.WithKind("Namespace"), "namespaces"), nil)
		if err == nil || !strings.Contains(err.Error(), "strictest") {
			t.Errorf("namespace with an unknown level: %v", err)
		}
	})
	t.Run("tightening a namespace warns about its pods", func(t *testing.T) {
		if err := factory.Core().V1().Pods().Informer().GetIndexer().Add(privilegedPod("open")); err != nil {
			t.Fatal(err)
		}
		old := nsWith("open", nil)
		tightened := nsWith("open", map[string]string{"pod-security.kubernetes.io/enforce": "baseline"})
		attrs := admission.NewAttributesRecord(tightened, old, corev1.SchemeGroupVersion.WithKind("Namespace"), "open", "open",
			corev1.SchemeGroupVersion.WithResource("namespaces"), "", admission.Update, &metav1.UpdateOptions{}, false, &user.DefaultInfo{Name: "alice"})
		w := &warnings{}
		if err := p.Validate(warning.WithWarningRecorder(context.Background(), w), attrs, nil); err != nil {
			t.Fatalf("label change refused: %v", err)
		}
		if got := w.all(); !strings.Contains(got, `existing pods in namespace "open" violate the new PodSecurity enforce level "baseline:latest"`) {
			t.Errorf("warnings %q", got)
		}
	})
}
