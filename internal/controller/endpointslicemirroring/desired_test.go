package endpointslicemirroring

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// view is a group as "type ports: ip(ready) ...".
func view(groups []*group) []string {
	var out []string
	for _, g := range groups {
		s := string(g.addressType)
		for _, p := range g.ports {
			s += fmt.Sprintf(" %s/%d", ptr.Deref(p.Name, ""), ptr.Deref(p.Port, 0))
		}
		s += ":"
		for _, e := range g.endpoints {
			s += fmt.Sprintf(" %s(%v)", e.Addresses[0], *e.Conditions.Ready)
		}
		out = append(out, s)
	}
	return out
}

func TestDesiredGroups(t *testing.T) {
	http := []corev1.EndpointPort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}
	both := []corev1.EndpointPort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}, {Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}
	bothReordered := []corev1.EndpointPort{both[1], both[0]}
	addr := func(ips ...string) []corev1.EndpointAddress {
		var out []corev1.EndpointAddress
		for _, ip := range ips {
			out = append(out, corev1.EndpointAddress{IP: ip})
		}
		return out
	}
	for _, tc := range []struct {
		name             string
		subsets          []corev1.EndpointSubset
		max              int
		want             []string
		invalid, overCap int
	}{
		{"ready and not ready", []corev1.EndpointSubset{{Addresses: addr("10.1.2.4", "10.1.2.3"), NotReadyAddresses: addr("10.1.2.5"), Ports: http}}, 1000,
			[]string{"IPv4 http/80: 10.1.2.3(true) 10.1.2.4(true) 10.1.2.5(false)"}, 0, 0},
		{"families apart", []corev1.EndpointSubset{{Addresses: addr("10.1.2.3", "fd00::3"), Ports: http}}, 1000,
			[]string{"IPv4 http/80: 10.1.2.3(true)", "IPv6 http/80: fd00::3(true)"}, 0, 0},
		{"subsets with the same ports merged, ready wins", []corev1.EndpointSubset{
			{NotReadyAddresses: addr("10.1.2.3"), Ports: both}, {Addresses: addr("10.1.2.3", "10.1.2.9"), Ports: bothReordered}}, 1000,
			[]string{"IPv4 http/80 https/443: 10.1.2.3(true) 10.1.2.9(true)"}, 0, 0},
		{"not an IP", []corev1.EndpointSubset{{Addresses: addr("10.1.2.3", "example.com"), Ports: http}}, 1000,
			[]string{"IPv4 http/80: 10.1.2.3(true)"}, 1, 0},
		{"over the cap of a subset", []corev1.EndpointSubset{{Addresses: addr("10.1.2.3", "10.1.2.4"), NotReadyAddresses: addr("10.1.2.5"), Ports: http}}, 2,
			[]string{"IPv4 http/80: 10.1.2.3(true) 10.1.2.4(true)"}, 0, 1},
		{"nothing", nil, 1000, nil, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := desiredGroups(&corev1.Endpoints{Subsets: tc.subsets}, tc.max)
			if got := view(m.groups); !reflect.DeepEqual(got, tc.want) || m.invalid != tc.invalid || m.overCap != tc.overCap {
				t.Errorf("groups %q invalid %d overCap %d; want %q %d %d", got, m.invalid, m.overCap, tc.want, tc.invalid, tc.overCap)
			}
		})
	}
	node := "node-a"
	m := desiredGroups(&corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Ports: http, Addresses: []corev1.EndpointAddress{{IP: "10.1.2.3",
		Hostname: "db-0", NodeName: &node, TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "db-0"}}}}}}, 1000)
	e := m.groups[0].endpoints[0]
	if ptr.Deref(e.Hostname, "") != "db-0" || ptr.Deref(e.NodeName, "") != node || e.TargetRef == nil || e.TargetRef.Name != "db-0" {
		t.Errorf("endpoint %+v", e)
	}
}

func TestMirroredAndMeta(t *testing.T) {
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "ext", Labels: map[string]string{"team": "x"},
		Annotations: map[string]string{"note": "y", corev1.EndpointsLastChangeTriggerTime: "t", corev1.LastAppliedConfigAnnotation: "{}"}}}
	if !mirrored(ep) {
		t.Error("a plain Endpoints is not mirrored")
	}
	if got := sliceLabels(ep); !reflect.DeepEqual(got, map[string]string{"team": "x", discoveryv1.LabelServiceName: "ext", discoveryv1.LabelManagedBy: ControllerName}) {
		t.Errorf("labels %v", got)
	}
	if got := sliceAnnotations(ep); !reflect.DeepEqual(got, map[string]string{"note": "y"}) {
		t.Errorf("annotations %v", got)
	}
	ep.Labels[discoveryv1.LabelSkipMirror] = "true"
	if mirrored(ep) {
		t.Error("an Endpoints labelled skip-mirror is mirrored")
	}
	lock := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"control-plane.alpha.kubernetes.io/leader": "{}"}}}
	if mirrored(lock) {
		t.Error("a leader-election lock is mirrored")
	}
}
