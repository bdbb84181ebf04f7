package admission_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// Through the API: a pod naming a RuntimeClass gets the class's overhead and scheduling,
// and one naming a class that does not exist is refused, dry run or not.
func TestRuntimeClasses(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx, c := context.Background(), s.Client
	ns := newNamespace(t, s)

	plain, fixed := uniqueName("rc-plain"), uniqueName("rc-overhead")
	for _, rc := range []*nodev1.RuntimeClass{
		{ObjectMeta: metav1.ObjectMeta{Name: plain}, Handler: "runc"},
		{ObjectMeta: metav1.ObjectMeta{Name: fixed}, Handler: "runc",
			Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("1Mi")}},
			Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"runtime": "runc"},
				Tolerations: []corev1.Toleration{{Key: "runtime", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}},
	} {
		if _, err := c.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		name := rc.Name
		t.Cleanup(func() { _ = c.NodeV1().RuntimeClasses().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	pod := func(class string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "rc-"},
			Spec: corev1.PodSpec{RuntimeClassName: &class, Containers: []corev1.Container{{Name: "x", Image: "busybox"}}}}
	}

	got, err := c.CoreV1().Pods(ns).Create(ctx, pod(plain), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Overhead) != 0 {
		t.Errorf("pod of a class without overhead: overhead %v", got.Spec.Overhead)
	}
	got, err = c.CoreV1().Pods(ns).Create(ctx, pod(fixed), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cpu, mem := got.Spec.Overhead[corev1.ResourceCPU], got.Spec.Overhead[corev1.ResourceMemory]; cpu.String() != "10m" || mem.String() != "1Mi" {
		t.Errorf("overhead %v, want the class's", got.Spec.Overhead)
	}
	if got.Spec.NodeSelector["runtime"] != "runc" {
		t.Errorf("nodeSelector %v, want the class's", got.Spec.NodeSelector)
	}
	tolerates := false
	for _, tol := range got.Spec.Tolerations {
		tolerates = tolerates || tol.Key == "runtime" && tol.Effect == corev1.TaintEffectNoSchedule
	}
	if !tolerates {
		t.Errorf("tolerations %v lack the class's", got.Spec.Tolerations)
	}

	missing := uniqueName("rc-missing")
	for _, opts := range []metav1.CreateOptions{dryRun, {}} {
		_, err := c.CoreV1().Pods(ns).Create(ctx, pod(missing), opts)
		want := fmt.Sprintf(`pods "rc-" is forbidden: pod rejected: RuntimeClass %q not found`, missing)
		if !apierrors.IsForbidden(err) || err.Error() != want {
			t.Errorf("pod of a missing class (dry run %v): %v, want %q", opts.DryRun, err, want)
		}
	}
	// A class deleted is refused too once it is gone.
	if err := c.NodeV1().RuntimeClasses().Delete(ctx, plain, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "pod of a deleted class refused", func() error {
		_, err := c.CoreV1().Pods(ns).Create(ctx, pod(plain), dryRun)
		if !apierrors.IsForbidden(err) {
			return fmt.Errorf("got %v", err)
		}
		return nil
	})
}
