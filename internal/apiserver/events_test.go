package apiserver_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

// core/v1 and events.k8s.io/v1 list the same Events, each with its own field labels:
// involvedObject.* and reportingComponent for core, regarding.* and reportingController
// for events.k8s.io; a label of the other API is refused.
func TestEventFieldSelectors(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx, c := context.Background(), s.Client
	ns := metav1.NamespaceDefault
	for _, e := range []*corev1.Event{
		{ObjectMeta: metav1.ObjectMeta{Name: "about-a"}, Reason: "Started", Type: corev1.EventTypeNormal, Message: "a",
			InvolvedObject:      corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "a", APIVersion: "v1"},
			Source:              corev1.EventSource{Component: "ctrl-a"},
			ReportingController: "ctrl-a", ReportingInstance: "ctrl-a-1"},
		{ObjectMeta: metav1.ObjectMeta{Name: "about-b"}, Reason: "Failed", Type: corev1.EventTypeWarning, Message: "b",
			InvolvedObject:      corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "b", APIVersion: "v1"},
			Source:              corev1.EventSource{Component: "ctrl-b"},
			ReportingController: "ctrl-b", ReportingInstance: "ctrl-b-1"},
	} {
		if _, err := c.CoreV1().Events(ns).Create(ctx, e, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	eventsV1 := func(selector string) ([]string, error) {
		list, err := c.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			return nil, err
		}
		var names []string
		for _, e := range list.Items {
			names = append(names, e.Name)
		}
		slices.Sort(names)
		return names, nil
	}
	coreV1 := func(selector string) ([]string, error) {
		list, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			return nil, err
		}
		var names []string
		for _, e := range list.Items {
			names = append(names, e.Name)
		}
		slices.Sort(names)
		return names, nil
	}

	for _, tc := range []struct {
		api      string
		list     func(string) ([]string, error)
		selector string
		want     []string
	}{
		{"events.k8s.io", eventsV1, "regarding.name=a", []string{"about-a"}},
		{"events.k8s.io", eventsV1, "regarding.kind=Pod,regarding.name!=a", []string{"about-b"}},
		{"events.k8s.io", eventsV1, "reportingController=ctrl-b", []string{"about-b"}},
		{"events.k8s.io", eventsV1, "type=Warning", []string{"about-b"}},
		{"events.k8s.io", eventsV1, "reason=Started,metadata.name=about-a", []string{"about-a"}},
		{"core", coreV1, "involvedObject.name=b", []string{"about-b"}},
		{"core", coreV1, "reportingComponent=ctrl-a", []string{"about-a"}},
		{"core", coreV1, "source=ctrl-b", []string{"about-b"}},
	} {
		got, err := tc.list(tc.selector)
		if err != nil {
			t.Errorf("%s %q: %v", tc.api, tc.selector, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s %q: %v, want %v", tc.api, tc.selector, got, tc.want)
		}
	}

	for _, tc := range []struct {
		api      string
		list     func(string) ([]string, error)
		selector string
		want     string
	}{
		{"events.k8s.io", eventsV1, "involvedObject.name=a", "field label not supported: involvedObject.name"},
		{"events.k8s.io", eventsV1, "reportingComponent=ctrl-a", "field label not supported: reportingComponent"},
		{"core", coreV1, "regarding.name=a", "field label not supported: regarding.name"},
	} {
		_, err := tc.list(tc.selector)
		if !apierrors.IsBadRequest(err) || err.Error() != tc.want {
			t.Errorf("%s %q: %v, want 400 %q", tc.api, tc.selector, err, tc.want)
		}
	}
}
