package admission_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// Through the API: pods take the priority of the PriorityClasses users create (and of
// the default class when they name none), and a second default class is refused.
func TestPriorityClasses(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx, c := context.Background(), s.Client
	ns := newNamespace(t, s)

	for _, pc := range []*schedulingv1.PriorityClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "standard"}, Value: 50, GlobalDefault: true},
		{ObjectMeta: metav1.ObjectMeta{Name: "batch"}, Value: 100, PreemptionPolicy: ptr.To(corev1.PreemptNever)},
	} {
		if _, err := c.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		name := pc.Name
		t.Cleanup(func() {
			_ = c.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}

	second := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "second"}, Value: 10, GlobalDefault: true}
	_, err := c.SchedulingV1().PriorityClasses().Create(ctx, second, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || err.Error() != `priorityclasses.scheduling.k8s.io "second" is forbidden: PriorityClass standard is already marked as default. Only one default can exist` {
		t.Errorf("second default class: %v", err)
	}

	pod := func(name, class string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{PriorityClassName: class, Containers: []corev1.Container{{Name: "x", Image: "busybox"}}}}
	}
	testutil.Eventually(t, "pod without class gets the default class", func() error {
		got, err := c.CoreV1().Pods(ns).Create(ctx, pod("plain", ""), dryRun)
		if err != nil {
			return err
		}
		if got.Spec.PriorityClassName != "standard" || ptr.Deref(got.Spec.Priority, -1) != 50 {
			return fmt.Errorf("class %q priority %v", got.Spec.PriorityClassName, got.Spec.Priority)
		}
		return nil
	})
	got, err := c.CoreV1().Pods(ns).Create(ctx, pod("batch", "batch"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(got.Spec.Priority, -1) != 100 || ptr.Deref(got.Spec.PreemptionPolicy, "") != corev1.PreemptNever {
		t.Errorf("batch pod: priority %v policy %v", got.Spec.Priority, got.Spec.PreemptionPolicy)
	}
	node, err := c.CoreV1().Pods(ns).Create(ctx, pod("node-critical", "system-node-critical"), dryRun)
	if err != nil {
		t.Fatalf("system-node-critical outside kube-system: %v", err)
	}
	if ptr.Deref(node.Spec.Priority, -1) != 2000001000 {
		t.Errorf("system-node-critical pod priority %v", node.Spec.Priority)
	}
}
