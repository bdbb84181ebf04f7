package kubelet

import (
	"context"
	"testing"

	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// A RuntimeClass resolves to its handler even before the watch has it (from the API
// server); a missing one is NotFound; no class is the default handler.
func TestRuntimeClassesHandler(t *testing.T) {
	client := fake.NewClientset(&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "rc"}, Handler: "runc"})
	rcs := NewRuntimeClasses(informers.NewSharedInformerFactory(client, 0), client) // never started
	ctx := context.Background()
	if h, err := rcs.Handler(ctx, "rc"); err != nil || h != "runc" {
		t.Errorf("rc: %q, %v", h, err)
	}
	if h, err := rcs.Handler(ctx, ""); err != nil || h != "" {
		t.Errorf("default: %q, %v", h, err)
	}
	if _, err := rcs.Handler(ctx, "missing"); !apierrors.IsNotFound(err) {
		t.Errorf("missing: %v", err)
	}
}
