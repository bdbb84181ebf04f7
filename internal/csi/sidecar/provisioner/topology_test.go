package provisioner

import (
	"reflect"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func zoneNode(name, zone string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{keyZone: zone, keyWK: zone}}}
}

func csiNode(name string, keys ...string) *storagev1.CSINode {
	return &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: drv, NodeID: "i-" + name, TopologyKeys: keys}}}}
}

func zonesOf(ts []*csi.Topology) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Segments[keyZone])
	}
	return out
}

func TestAccessibilityRequirements(t *testing.T) {
	nodes := map[string]*corev1.Node{"a": zoneNode("a", "us-east-1a"), "b": zoneNode("b", "us-east-1b"), "c": zoneNode("c", "us-east-1c"), "b2": zoneNode("b2", "us-east-1b")}
	all := []*storagev1.CSINode{csiNode("a", keyZone), csiNode("b", keyZone), csiNode("c", keyZone), csiNode("b2", keyZone)}
	allowed := []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: keyZone, Values: []string{"us-east-1b", "us-east-1c"}}}}}
	cases := []struct {
		name       string
		in         topologyInput
		requisite  []string
		preferred0 string
		err        string
		nilReq     bool
	}{
		{name: "selected node: its zone first, all zones requisite",
			in:        topologyInput{selected: nodes["b"], nodes: nodes, csiNodes: all},
			requisite: []string{"us-east-1a", "us-east-1b", "us-east-1c"}, preferred0: "us-east-1b"},
		{name: "selected node, strict: only its zone",
			in:        topologyInput{selected: nodes["c"], nodes: nodes, csiNodes: all, strict: true},
			requisite: []string{"us-east-1c"}, preferred0: "us-east-1c"},
		{name: "selected node within allowedTopologies",
			in:        topologyInput{selected: nodes["c"], nodes: nodes, csiNodes: all, allowed: allowed},
			requisite: []string{"us-east-1b", "us-east-1c"}, preferred0: "us-east-1c"},
		{name: "selected node outside allowedTopologies",
			in:  topologyInput{selected: nodes["a"], nodes: nodes, csiNodes: all, allowed: allowed},
			err: "outside the class's allowedTopologies"},
		{name: "selected node without the driver",
			in:  topologyInput{selected: nodes["a"], nodes: nodes, csiNodes: all[1:]},
			err: "not registered on selected node"},
		{name: "selected node without the label",
			in:  topologyInput{selected: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, nodes: nodes, csiNodes: all},
			err: `has no label "topology.ebs.csi.aws.com/zone"`},
		{name: "immediate: every zone with the driver",
			in:        topologyInput{nodes: nodes, csiNodes: all, pvName: "pvc-1"},
			requisite: []string{"us-east-1a", "us-east-1b", "us-east-1c"}},
		{name: "immediate with allowedTopologies",
			in:        topologyInput{nodes: nodes, csiNodes: all, allowed: allowed, pvName: "pvc-1"},
			requisite: []string{"us-east-1b", "us-east-1c"}},
		{name: "immediate, no node runs the driver",
			in:     topologyInput{nodes: nodes},
			nilReq: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.driver = drv
			req, err := accessibilityRequirements(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.nilReq {
				if req != nil {
					t.Fatalf("want no requirement, got %v", req)
				}
				return
			}
			if got := zonesOf(req.Requisite); !reflect.DeepEqual(got, tc.requisite) {
				t.Errorf("requisite %v, want %v", got, tc.requisite)
			}
			if len(req.Preferred) != len(req.Requisite) {
				t.Errorf("preferred %v should order every requisite zone", zonesOf(req.Preferred))
			}
			if tc.preferred0 != "" && req.Preferred[0].Segments[keyZone] != tc.preferred0 {
				t.Errorf("preferred first %s, want %s", req.Preferred[0].Segments[keyZone], tc.preferred0)
			}
		})
	}
}

// Immediate volumes spread: the preferred zone depends on the volume name.
func TestPreferredSpreads(t *testing.T) {
	nodes := map[string]*corev1.Node{"a": zoneNode("a", "us-east-1a"), "b": zoneNode("b", "us-east-1b"), "c": zoneNode("c", "us-east-1c")}
	all := []*storagev1.CSINode{csiNode("a", keyZone), csiNode("b", keyZone), csiNode("c", keyZone)}
	seen := map[string]int{}
	for i := 0; i < 60; i++ {
		req, err := accessibilityRequirements(topologyInput{driver: drv, nodes: nodes, csiNodes: all, pvName: "pvc-" + string(rune('a'+i%26)) + string(rune('a'+i/26))})
		if err != nil {
			t.Fatal(err)
		}
		seen[req.Preferred[0].Segments[keyZone]]++
	}
	if len(seen) != 3 {
		t.Fatalf("preferred zones over 60 names: %v, want all three", seen)
	}
}

func TestFlattenAllowed(t *testing.T) {
	terms := []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
		{Key: "zone", Values: []string{"a", "b"}}, {Key: "rack", Values: []string{"1", "2"}},
	}}}
	got := dedupSorted(flattenAllowed(terms))
	var keys []string
	for _, s := range got {
		keys = append(keys, s.String())
	}
	want := []string{"rack=1,zone=a", "rack=1,zone=b", "rack=2,zone=a", "rack=2,zone=b"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("got %v, want %v", keys, want)
	}
}
