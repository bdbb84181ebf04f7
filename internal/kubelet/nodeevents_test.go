package kubelet

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A status write records an event per condition whose status it changes: all of them
// the first time, NodeReady when the node comes back, NodeNotReady when it fails.
func TestNodeStatusEvents(t *testing.T) {
	now := metav1.Now()
	healthy := nodeConditions(nil, nil, now)
	down := nodeConditions(healthy, errors.NewServiceUnavailable("no runtime"), now)
	unknown := make([]corev1.NodeCondition, len(healthy))
	for i, c := range healthy {
		c.Status = corev1.ConditionUnknown
		unknown[i] = c
	}
	for _, tc := range []struct {
		name      string
		prev, cur []corev1.NodeCondition
		want      []string
	}{
		{"first status", nil, healthy, []string{"NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID", "NodeReady"}},
		{"unchanged", healthy, nodeConditions(healthy, nil, now), nil},
		{"runtime down", healthy, down, []string{"NodeNotReady"}},
		{"runtime back", down, nodeConditions(down, nil, now), []string{"NodeReady"}},
		{"after the controller marked it unknown", unknown, nodeConditions(unknown, nil, now),
			[]string{"NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID", "NodeReady"}},
	} {
		if got := nodeStatusEvents(tc.prev, tc.cur); !slices.Equal(got, tc.want) {
			t.Errorf("%s: events %v, want %v", tc.name, got, tc.want)
		}
	}
}
