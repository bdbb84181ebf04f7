package namespace

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
)

var (
	podsGVR       = corev1.SchemeGroupVersion.WithResource("pods")
	configMapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")
	secretsGVR    = corev1.SchemeGroupVersion.WithResource("secrets")
	rolesGVR      = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}
)

// Pods are deleted before everything else, wherever discovery lists them; while pods
// remain nothing else is touched.
func TestEmptyNamespaceDeletesPodsFirst(t *testing.T) {
	cases := []struct {
		name      string
		resources []schema.GroupVersionResource
		left      map[schema.GroupVersionResource]int
		want      []schema.GroupVersionResource
		remaining int
	}{
		{name: "pods listed last", resources: []schema.GroupVersionResource{configMapsGVR, rolesGVR, podsGVR},
			want: []schema.GroupVersionResource{podsGVR, configMapsGVR, rolesGVR}},
		{name: "pods remain", resources: []schema.GroupVersionResource{configMapsGVR, podsGVR, secretsGVR},
			left: map[schema.GroupVersionResource]int{podsGVR: 2}, want: []schema.GroupVersionResource{podsGVR}, remaining: 2},
		{name: "no pods resource", resources: []schema.GroupVersionResource{secretsGVR, configMapsGVR},
			left: map[schema.GroupVersionResource]int{secretsGVR: 1}, want: []schema.GroupVersionResource{secretsGVR, configMapsGVR}, remaining: 1},
		{name: "others remain", resources: []schema.GroupVersionResource{podsGVR, secretsGVR, configMapsGVR},
			left: map[schema.GroupVersionResource]int{secretsGVR: 1, configMapsGVR: 3}, want: []schema.GroupVersionResource{podsGVR, secretsGVR, configMapsGVR}, remaining: 4},
	}
	for _, tc := range cases {
		var calls []schema.GroupVersionResource
		del := func(_ context.Context, ns string, gvr schema.GroupVersionResource) (int, map[string]int, error) {
			if ns != "doomed" {
				t.Errorf("%s: deleted in namespace %q", tc.name, ns)
			}
			calls = append(calls, gvr)
			return tc.left[gvr], nil, nil
		}
		left, err := emptyNamespace(context.Background(), "doomed", tc.resources, del)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if remaining := left.total(); remaining != tc.remaining {
			t.Errorf("%s: %d remaining, want %d", tc.name, remaining, tc.remaining)
		}
		if !slices.Equal(calls, tc.want) {
			t.Errorf("%s: deleted %v, want %v", tc.name, calls, tc.want)
		}
	}

	boom := errors.New("boom")
	_, err := emptyNamespace(context.Background(), "doomed", []schema.GroupVersionResource{configMapsGVR, podsGVR},
		func(_ context.Context, _ string, gvr schema.GroupVersionResource) (int, map[string]int, error) {
			if gvr == podsGVR {
				return 0, nil, boom
			}
			t.Errorf("deleted %v after pods failed", gvr)
			return 0, nil, nil
		})
	if !errors.Is(err, boom) {
		t.Errorf("pod deletion failure: %v", err)
	}
}

// preferredDiscovery answers ServerPreferredNamespacedResources with lists.
type preferredDiscovery struct {
	*fakediscovery.FakeDiscovery
	lists []*metav1.APIResourceList
}

func (d preferredDiscovery) ServerPreferredNamespacedResources() ([]*metav1.APIResourceList, error) {
	return d.lists, nil
}

func partial(gvr schema.GroupVersionResource, kind, ns, name string, finalizers ...string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: gvr.GroupVersion().String(), Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Finalizers: finalizers},
	}
}

// A terminating namespace whose pod is held by a finalizer keeps its other objects
// until the pod is gone, and its status conditions say so; then they are deleted and the
// namespace is finalized.
func TestSyncWaitsForPods(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed", UID: "ns-uid", DeletionTimestamp: &metav1.Time{Time: time.Now()}},
		Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}}}
	client := fake.NewClientset(ns)
	client.PrependReactor("create", "namespaces", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "finalize" {
			return false, nil, nil
		}
		return true, action.(clienttesting.CreateAction).GetObject(), nil
	})

	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	md := metadatafake.NewSimpleMetadataClient(scheme,
		partial(podsGVR, "Pod", "doomed", "held", "example.com/hold"),
		partial(configMapsGVR, "ConfigMap", "doomed", "settings"))
	tracker := md.Tracker()
	// The API server marks an object with finalizers deleted instead of removing it.
	deleteOne := func(gvr schema.GroupVersionResource, ns, name string) error {
		obj, err := tracker.Get(gvr, ns, name)
		if err != nil {
			return err
		}
		m := obj.(*metav1.PartialObjectMetadata)
		if len(m.Finalizers) == 0 {
			return tracker.Delete(gvr, ns, name)
		}
		if m.DeletionTimestamp == nil {
			m = m.DeepCopy()
			m.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			return tracker.Update(gvr, m, ns)
		}
		return nil
	}
	md.PrependReactor("delete", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		del := action.(clienttesting.DeleteAction)
		return true, nil, deleteOne(del.GetResource(), del.GetNamespace(), del.GetName())
	})
	md.PrependReactor("delete-collection", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		gvr, ns := action.GetResource(), action.GetNamespace()
		list, err := tracker.List(gvr, schema.GroupVersionKind{Group: "fake-metadata-client-group", Version: "v1", Kind: ""}, ns)
		if err != nil {
			return true, nil, err
		}
		for _, item := range list.(*metav1.List).Items {
			m := item.Object.(*metav1.PartialObjectMetadata)
			if err := deleteOne(gvr, ns, m.Name); err != nil {
				return true, nil, err
			}
		}
		return true, nil, nil
	})

	c, err := New(Config{}, client, md)
	if err != nil {
		t.Fatal(err)
	}
	c.discovery = preferredDiscovery{FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}, lists: []*metav1.APIResourceList{{
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{
			{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: metav1.Verbs{"list", "delete", "deletecollection"}},
			{Name: "pods", Namespaced: true, Kind: "Pod", Verbs: metav1.Verbs{"list", "delete", "deletecollection"}},
		},
	}}}
	if err := c.factory.Core().V1().Namespaces().Informer().GetIndexer().Add(ns); err != nil {
		t.Fatal(err)
	}

	if err := c.sync(ctx, "doomed"); !errors.Is(err, errContentRemains) {
		t.Fatalf("first pass: %v, want content to remain", err)
	}
	pod, err := tracker.Get(podsGVR, "doomed", "held")
	if err != nil || pod.(*metav1.PartialObjectMetadata).DeletionTimestamp == nil {
		t.Fatalf("pod after the first pass: %v %v, want it terminating", pod, err)
	}
	if err := configMapUntouched(tracker); err != nil {
		t.Fatal(err)
	}
	// The namespace's status says what holds its deletion up.
	got, err := client.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[corev1.NamespaceConditionType]string{
		corev1.NamespaceDeletionDiscoveryFailure: "False ResourcesDiscovered",
		corev1.NamespaceDeletionGVParsingFailure: "False ParsedGroupVersions",
		corev1.NamespaceDeletionContentFailure:   "False ContentDeleted",
		corev1.NamespaceContentRemaining:         "True SomeResourcesRemain: Some resources are remaining: pods. has 1 resource instances",
		corev1.NamespaceFinalizersRemaining:      "True SomeFinalizersRemain: Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances",
	}
	if len(got.Status.Conditions) != len(want) {
		t.Errorf("conditions %+v, want one of each of %v", got.Status.Conditions, want)
	}
	for _, c := range got.Status.Conditions {
		line := string(c.Status) + " " + c.Reason
		if c.Status == corev1.ConditionTrue {
			line += ": " + c.Message
		}
		if line != want[c.Type] || c.LastTransitionTime.IsZero() {
			t.Errorf("condition %s: %q at %v, want %q", c.Type, line, c.LastTransitionTime, want[c.Type])
		}
	}
	for _, a := range md.Actions() {
		if a.GetResource() == configMapsGVR {
			t.Errorf("configmaps touched while a pod remained: %s", a.GetVerb())
		}
	}

	// A second pass while the pod is still held changes nothing else either.
	if err := c.sync(ctx, "doomed"); !errors.Is(err, errContentRemains) {
		t.Fatalf("second pass: %v, want content to remain", err)
	}
	if err := configMapUntouched(tracker); err != nil {
		t.Fatal(err)
	}

	// The finalizer's owner lets the pod go.
	if err := tracker.Delete(podsGVR, "doomed", "held"); err != nil {
		t.Fatal(err)
	}
	if err := c.sync(ctx, "doomed"); err != nil {
		t.Fatalf("pass after the pod is gone: %v", err)
	}
	if _, err := tracker.Get(configMapsGVR, "doomed", "settings"); !apierrors.IsNotFound(err) {
		t.Errorf("configmap after the pods are gone: %v, want it deleted", err)
	}
	finalized, deleted := false, false
	for _, a := range client.Actions() {
		finalized = finalized || (a.GetVerb() == "create" && a.GetSubresource() == "finalize")
		deleted = deleted || (a.GetVerb() == "delete" && a.GetResource().Resource == "namespaces")
	}
	if !finalized || !deleted {
		t.Errorf("namespace finalized %v, deleted %v; want both", finalized, deleted)
	}
}

func configMapUntouched(tracker clienttesting.ObjectTracker) error {
	cm, err := tracker.Get(configMapsGVR, "doomed", "settings")
	if err != nil {
		return fmt.Errorf("configmap while the pod remains: %w", err)
	}
	if cm.(*metav1.PartialObjectMetadata).DeletionTimestamp != nil {
		return errors.New("configmap marked deleted while the pod remains")
	}
	return nil
}

// Conditions keep their transition time while their status stays; a status change moves
// it; nothing changed is reported as such.
func TestMergeConditions(t *testing.T) {
	t0, t1 := metav1.NewTime(time.Unix(100, 0)), metav1.NewTime(time.Unix(200, 0))
	var status corev1.NamespaceStatus
	remaining := contentLeft{}
	remaining.add(podsGVR, 2, map[string]int{"example.com/hold": 2})
	if !mergeConditions(&status, deletionConditions(nil, remaining, nil), t0) || len(status.Conditions) != len(conditionTypes) {
		t.Fatalf("first merge: %+v", status.Conditions)
	}
	if mergeConditions(&status, deletionConditions(nil, remaining, nil), t1) {
		t.Error("the same conditions again reported as a change")
	}
	if !mergeConditions(&status, deletionConditions(nil, contentLeft{}, errors.New("boom")), t1) {
		t.Fatal("content gone and a delete failure not reported as a change")
	}
	for _, c := range status.Conditions {
		changed := c.Type == corev1.NamespaceContentRemaining || c.Type == corev1.NamespaceFinalizersRemaining ||
			c.Type == corev1.NamespaceDeletionContentFailure
		if want := map[bool]metav1.Time{true: t1, false: t0}[changed]; !c.LastTransitionTime.Equal(&want) {
			t.Errorf("%s (%s): transition at %v, want %v", c.Type, c.Status, c.LastTransitionTime, want)
		}
		if c.Type == corev1.NamespaceDeletionContentFailure && (c.Status != corev1.ConditionTrue || c.Reason != "ContentDeletionFailed" || !strings.Contains(c.Message, "boom")) {
			t.Errorf("content failure: %+v", c)
		}
	}
}
