package overlay

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestAnnotationPatch(t *testing.T) {
	n := func(a map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: a}}
	}
	for _, tc := range []struct {
		name    string
		node    *corev1.Node
		mac, ip string
		want    string
	}{
		{"none yet", n(nil), "02:00:00:00:00:01", "172.31.1.10",
			`{"metadata":{"annotations":{"kubelab.io/node-ip":"172.31.1.10","kubelab.io/vtep-mac":"02:00:00:00:00:01"}}}`},
		{"up to date", n(ann("02:00:00:00:00:01", "172.31.1.10")), "02:00:00:00:00:01", "172.31.1.10", ""},
		{"ip changed", n(ann("02:00:00:00:00:01", "172.31.1.10")), "02:00:00:00:00:01", "172.31.1.11",
			`{"metadata":{"annotations":{"kubelab.io/node-ip":"172.31.1.11"}}}`},
		{"direct mode drops the mac", n(ann("02:00:00:00:00:01", "172.31.1.10")), "", "172.31.1.10",
			`{"metadata":{"annotations":{"kubelab.io/vtep-mac":null}}}`},
		{"direct mode, no mac", n(ann("", "172.31.1.10")), "", "172.31.1.10", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(annotationPatch(tc.node, tc.mac, tc.ip)); got != tc.want {
				t.Errorf("patch\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestPublishRetriesConflicts(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{"keep": "me"}}}
	client := fake.NewClientset(node)
	conflicts := 2
	client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, errConflict()
		}
		return false, nil, nil
	})
	done, err := publish(context.Background(), client, node, "02:00:00:00:00:01", "172.31.1.10")
	if err != nil || !done {
		t.Fatalf("publish = %v, %v", done, err)
	}
	got, _ := client.CoreV1().Nodes().Get(context.Background(), "n", metav1.GetOptions{})
	if got.Annotations[AnnotationVTEPMAC] != "02:00:00:00:00:01" || got.Annotations[AnnotationNodeIP] != "172.31.1.10" ||
		got.Annotations["keep"] != "me" {
		t.Errorf("annotations %v", got.Annotations)
	}
}

func errConflict() error {
	return apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n", errors.New("the object has been modified"))
}
