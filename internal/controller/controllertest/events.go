package controllertest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// EventsAbout lists the Events of namespace ns about the object named name, failing the
// test if the API server cannot be asked.
func EventsAbout(t testing.TB, client kubernetes.Interface, ns, name string) []corev1.Event {
	t.Helper()
	list, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, ev := range list.Items {
		if ev.InvolvedObject.Name == name {
			out = append(out, ev)
		}
	}
	return out
}

// HasEvent tells whether an Event of namespace ns about name has the given reason.
func HasEvent(t testing.TB, client kubernetes.Interface, ns, name, reason string) bool {
	t.Helper()
	for _, ev := range EventsAbout(t, client, ns, name) {
		if ev.Reason == reason {
			return true
		}
	}
	return false
}
