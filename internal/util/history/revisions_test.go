package history

import (
	"context"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// Create: a new revision is created; one of the same owner and data already there (a
// cache that had not seen it) is that one; one with other data is a hash collision.
func TestCreate(t *testing.T) {
	ctx := context.Background()
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "uid-1", Controller: ptr.To(true)}
	rev := func(data string) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "agent-abc", OwnerReferences: []metav1.OwnerReference{owner}},
			Data: runtime.RawExtension{Raw: []byte(data)}, Revision: 1}
	}
	revs := fake.NewClientset().AppsV1().ControllerRevisions("ns")
	collisions := 0
	collided := func(context.Context) error { collisions++; return nil }

	if cr, err := Create(ctx, revs, rev(`{"a":1}`), owner.UID, collided); err != nil || cr.Name != "agent-abc" {
		t.Fatalf("first create: %v, %v", cr, err)
	}
	if cr, err := Create(ctx, revs, rev(`{"a":1}`), owner.UID, collided); err != nil || string(cr.Data.Raw) != `{"a":1}` || collisions != 0 {
		t.Errorf("the same revision again: %v, %v, %d collisions; want it back, none", cr, err, collisions)
	}
	if cr, err := Create(ctx, revs, rev(`{"a":2}`), owner.UID, collided); err == nil || !strings.Contains(err.Error(), "hash collision") || cr != nil || collisions != 1 {
		t.Errorf("another template under the name: %v, %v, %d collisions; want a hash collision counted once", cr, err, collisions)
	}
	boom := errors.New("boom")
	if _, err := Create(ctx, revs, rev(`{"a":3}`), owner.UID, func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("a collision whose count fails: %v, want it named", err)
	}
}
