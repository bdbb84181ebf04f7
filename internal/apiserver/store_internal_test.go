package apiserver

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"
)

// decoratorSpy is a RESTOptionsGetter whose decorator records the trigger and indexers a
// store hands the watch cache.
type decoratorSpy struct {
	trigger  storage.IndexerFuncs
	indexers *cache.Indexers
}

func (d *decoratorSpy) GetRESTOptions(resource schema.GroupResource, _ runtime.Object) (generic.RESTOptions, error) {
	return generic.RESTOptions{
		StorageConfig:  &storagebackend.ConfigForResource{GroupResource: resource},
		ResourcePrefix: resource.Resource,
		Decorator: func(_ *storagebackend.ConfigForResource, _ string, _ func(runtime.Object) (string, error),
			_, _ func() runtime.Object, _ storage.AttrFunc, trigger storage.IndexerFuncs, indexers *cache.Indexers) (storage.Interface, factory.DestroyFunc, error) {
			d.trigger, d.indexers = trigger, indexers
			return nil, func() {}, nil
		},
	}, nil
}

// TestPodWatchCacheIndex: the pod store hands the watch cache spec.nodeName as trigger
// and index, and its predicates name the field as indexed, so that a kubelet's pod watch
// is handed its node's pods' events only and its list reads one index bucket.
func TestPodWatchCacheIndex(t *testing.T) {
	var pods *resource
	for _, r := range coreResources() {
		if r.plural == "pods" {
			pods = &r
		}
	}
	spy := &decoratorSpy{}
	store, err := newStore(runtime.NewScheme(), pods, spy)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "node-a"}}
	trigger := spy.trigger["spec.nodeName"]
	if trigger == nil || trigger(pod) != "node-a" {
		t.Fatalf("watch cache trigger %v: want spec.nodeName giving node-a", spy.trigger)
	}
	if spy.indexers == nil || (*spy.indexers)[storage.FieldIndex("spec.nodeName")] == nil {
		t.Fatalf("watch cache indexers %v: want %s", spy.indexers, storage.FieldIndex("spec.nodeName"))
	}
	got, err := (*spy.indexers)[storage.FieldIndex("spec.nodeName")](pod)
	if err != nil || !slices.Equal(got, []string{"node-a"}) {
		t.Fatalf("index of the pod: %v, %v; want [node-a]", got, err)
	}
	pred := store.PredicateFunc(labels.Everything(), fields.OneTermEqualSelector("spec.nodeName", "node-a"))
	if !slices.Equal(pred.IndexFields, []string{"spec.nodeName"}) {
		t.Fatalf("predicate index fields %v, want [spec.nodeName]", pred.IndexFields)
	}
	if ok, err := pred.Matches(pod); !ok || err != nil {
		t.Fatalf("predicate on spec.nodeName=node-a does not match the pod: %v", err)
	}

	// Kinds without an indexed field hand the watch cache neither.
	for _, r := range coreResources() {
		if r.plural != "nodes" {
			continue
		}
		spy := &decoratorSpy{}
		if _, err := newStore(runtime.NewScheme(), &r, spy); err != nil {
			t.Fatal(err)
		}
		if spy.trigger != nil || spy.indexers != nil {
			t.Fatalf("nodes: trigger %v, indexers %v; want none", spy.trigger, spy.indexers)
		}
	}
}
