package serviceaccount

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// liveGets counts the GETs that reached the API.
func liveGets(c *fake.Clientset) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == "get" {
			n++
		}
	}
	return n
}

func TestClusterGetterReadsTheCacheOnceSyncedAndTheAPIOtherwise(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: meta("team", "web", "pod-uid")}
	sa := &corev1.ServiceAccount{ObjectMeta: meta("team", "builder", "sa-uid")}
	node := &corev1.Node{ObjectMeta: meta("", "node-1", "node-uid")}
	secret := &corev1.Secret{ObjectMeta: meta("team", "bound", "secret-uid")}
	client := fake.NewClientset(pod, sa, node, secret)
	factory := informers.NewSharedInformerFactory(client, 0)
	g := NewClusterGetter(client, factory)
	ctx := context.Background()

	// Before the informers run, every read is live.
	if got, err := g.Pod(ctx, "team", "web", "pod-uid"); err != nil || got.UID != "pod-uid" {
		t.Fatalf("pod before sync: %v, %v", got, err)
	}
	if n := liveGets(client); n != 1 {
		t.Errorf("%d live GETs before sync, want 1", n)
	}

	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	factory.Start(stop)
	for typ, ok := range factory.WaitForCacheSync(stop) {
		if !ok {
			t.Fatalf("%v did not sync", typ)
		}
	}
	client.ClearActions()

	// Synced: hits come from the cache.
	if _, err := g.Pod(ctx, "team", "web", "pod-uid"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.ServiceAccount(ctx, "team", "builder", "sa-uid"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Node(ctx, "node-1", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Secret(ctx, "team", "bound", "secret-uid"); err != nil {
		t.Fatal(err)
	}
	if n := liveGets(client); n != 0 {
		t.Errorf("%d live GETs for cached objects, want 0", n)
	}

	// Another uid than the cache's, or a miss: the API decides.
	if got, err := g.Pod(ctx, "team", "web", "newer-uid"); err != nil || got.UID != "pod-uid" {
		t.Errorf("pod of another uid: %v, %v", got, err)
	}
	if _, err := g.Pod(ctx, "team", "missing", ""); !apierrors.IsNotFound(err) {
		t.Errorf("missing pod: %v, want NotFound", err)
	}
	if n := liveGets(client); n != 2 {
		t.Errorf("%d live GETs for a uid mismatch and a miss, want 2", n)
	}
}
