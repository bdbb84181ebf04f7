package endpointutil

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func sliceAt(name, rv string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
}

func TestSliceTracker(t *testing.T) {
	const svc = "default/web"
	t.Run("nothing written: never stale", func(t *testing.T) {
		if NewSliceTracker().Stale(svc, nil) {
			t.Error("stale without writes")
		}
	})
	t.Run("an update the cache has not seen", func(t *testing.T) {
		tr := NewSliceTracker()
		tr.Wrote(svc, sliceAt("web-a", "12"), false)
		if !tr.Stale(svc, []*discoveryv1.EndpointSlice{sliceAt("web-a", "10")}) {
			t.Error("cache at 10 after a write at 12 is not stale")
		}
		if tr.Stale(svc, []*discoveryv1.EndpointSlice{sliceAt("web-a", "12")}) {
			t.Error("cache at 12 after a write at 12 is stale")
		}
		// Caught up once: forgotten, so a later, older-looking cache is not held against it.
		if tr.Stale(svc, []*discoveryv1.EndpointSlice{sliceAt("web-a", "3")}) {
			t.Error("a write the cache caught up with is still remembered")
		}
	})
	t.Run("a create the cache has not seen", func(t *testing.T) {
		tr := NewSliceTracker()
		tr.Wrote(svc, sliceAt("web-b", "20"), false)
		if !tr.Stale(svc, nil) {
			t.Error("a cache without the created slice is not stale")
		}
		if tr.Stale(svc, []*discoveryv1.EndpointSlice{sliceAt("web-b", "20")}) {
			t.Error("a cache with the created slice is stale")
		}
	})
	t.Run("a delete the cache has not seen", func(t *testing.T) {
		tr := NewSliceTracker()
		tr.Wrote(svc, sliceAt("web-c", "30"), true)
		if !tr.Stale(svc, []*discoveryv1.EndpointSlice{sliceAt("web-c", "30")}) {
			t.Error("a cache that still holds the deleted slice is not stale")
		}
		if tr.Stale(svc, nil) {
			t.Error("a cache without the deleted slice is stale")
		}
	})
	t.Run("a slice deleted by someone else", func(t *testing.T) {
		tr := NewSliceTracker()
		tr.Wrote(svc, sliceAt("web-d", "40"), false)
		tr.Gone(svc, "web-d")
		if tr.Stale(svc, nil) {
			t.Error("a slice the informer saw deleted keeps the cache stale")
		}
	})
	t.Run("the service is gone", func(t *testing.T) {
		tr := NewSliceTracker()
		tr.Wrote(svc, sliceAt("web-e", "50"), false)
		tr.Forget(svc)
		if tr.Stale(svc, nil) || len(tr.written) != 0 {
			t.Error("a forgotten service still has writes")
		}
	})
}
