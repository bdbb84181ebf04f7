package admission

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// The generic quota admission with kubelab's evaluators: a pod past the quota is
// refused with the quota's numbers, one within it is charged to status.used, and a quota
// whose usage is not computed yet refuses.
func TestResourceQuotaPlugin(t *testing.T) {
	quota := func(ns string, used corev1.ResourceList) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: ns}, Spec: corev1.ResourceQuotaSpec{Hard: rl("pods", "3")},
			Status: corev1.ResourceQuotaStatus{Hard: rl("pods", "3"), Used: used}}
	}
	client := fake.NewClientset(quota("full", rl("pods", "3")), quota("room", rl("pods", "2")), quota("fresh", nil))
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	p, err := newResourceQuota(Deps{Client: client, Factory: informers.NewSharedInformerFactory(client, 0), Stop: stop})
	if err != nil {
		t.Fatal(err)
	}
	podIn := func(ns string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "busybox"}}}}
	}
	podKind := corev1.SchemeGroupVersion.WithKind("Pod")
	ctx := context.Background()

	err = p.Validate(ctx, createAttrs(podIn("full"), "full", "p", podKind, "pods"), nil)
	if want := `pods "p" is forbidden: exceeded quota: q, requested: pods=1, used: pods=3, limited: pods=3`; err == nil || err.Error() != want {
		t.Errorf("pod past the quota: %v, want %q", err, want)
	}
	if err := p.Validate(ctx, createAttrs(podIn("room"), "room", "p", podKind, "pods"), nil); err != nil {
		t.Fatalf("pod within the quota: %v", err)
	}
	rq, err := client.CoreV1().ResourceQuotas("room").Get(ctx, "q", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if used := rq.Status.Used[corev1.ResourcePods]; used.Value() != 3 {
		t.Errorf("used after an admitted pod: %s, want 3", used.String())
	}
	err = p.Validate(ctx, createAttrs(podIn("fresh"), "fresh", "p", podKind, "pods"), nil)
	if want := `pods "p" is forbidden: status unknown for quota: q, resources: pods`; err == nil || err.Error() != want {
		t.Errorf("quota without status: %v, want %q", err, want)
	}
}
