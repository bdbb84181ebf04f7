package pluginmanager

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func nodeWith(annotation string, labels map[string]string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels}}
	if annotation != "" {
		n.Annotations = map[string]string{AnnotationNodeID: annotation, "other": "x"}
	}
	return n
}

func TestNodeIDAnnotation(t *testing.T) {
	n := nodeWith("", nil)
	if changed, err := setNodeID(n, "b.csi", "id-b"); err != nil || !changed {
		t.Fatalf("setNodeID on a bare node = %v %v", changed, err)
	}
	if changed, err := setNodeID(n, "a.csi", "id-a"); err != nil || !changed {
		t.Fatalf("setNodeID of a second driver = %v %v", changed, err)
	}
	if got := n.Annotations[AnnotationNodeID]; got != `{"a.csi":"id-a","b.csi":"id-b"}` {
		t.Errorf("annotation = %s", got)
	}
	if changed, _ := setNodeID(n, "a.csi", "id-a"); changed {
		t.Error("setNodeID with the same id changed the node")
	}
	if changed, _ := removeNodeID(n, "c.csi"); changed {
		t.Error("removing an absent driver changed the node")
	}
	if changed, err := removeNodeID(n, "a.csi"); err != nil || !changed || n.Annotations[AnnotationNodeID] != `{"b.csi":"id-b"}` {
		t.Errorf("removeNodeID = %v %v, annotation %s", changed, err, n.Annotations[AnnotationNodeID])
	}
	if changed, err := removeNodeID(n, "b.csi"); err != nil || !changed {
		t.Fatalf("removeNodeID of the last driver = %v %v", changed, err)
	}
	if _, ok := n.Annotations[AnnotationNodeID]; ok {
		t.Error("an empty annotation stayed")
	}

	broken := nodeWith("not json", nil)
	if _, err := setNodeID(broken, "a.csi", "id"); err == nil || !strings.Contains(err.Error(), "not json") {
		t.Errorf("setNodeID on a broken annotation = %v", err)
	}
	if _, err := removeNodeID(broken, "a.csi"); err == nil {
		t.Error("removeNodeID accepted a broken annotation")
	}
}

func TestTopologyLabels(t *testing.T) {
	n := nodeWith("", map[string]string{"zone": "a"})
	if changed, err := setTopologyLabels(n, map[string]string{"zone": "a"}); err != nil || changed {
		t.Errorf("labels already there = %v %v", changed, err)
	}
	if changed, err := setTopologyLabels(n, map[string]string{"zone": "a", "rack": "r1"}); err != nil || !changed || n.Labels["rack"] != "r1" {
		t.Errorf("new label = %v %v %v", changed, err, n.Labels)
	}
	_, err := setTopologyLabels(n, map[string]string{"zone": "b", "row": "7"})
	if err == nil || !strings.Contains(err.Error(), "collision") || n.Labels["row"] != "" {
		t.Errorf("collision = %v, labels %v", err, n.Labels)
	}
	if changed, err := setTopologyLabels(nodeWith("", nil), nil); err != nil || changed {
		t.Errorf("no topology = %v %v", changed, err)
	}
}

func TestCSINodeDrivers(t *testing.T) {
	d := csiNodeDriver("a.csi", "id", 1<<40, map[string]string{"z": "1", "b": "2", "m": "3"})
	want := storagev1.CSINodeDriver{Name: "a.csi", NodeID: "id", TopologyKeys: []string{"b", "m", "z"},
		Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](1<<31 - 1)}}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("csiNodeDriver = %+v, want %+v", d, want)
	}
	if d := csiNodeDriver("a.csi", "id", 0, nil); d.Allocatable != nil || d.TopologyKeys != nil {
		t.Errorf("driver without limit or topology = %+v", d)
	}

	other := storagev1.CSINodeDriver{Name: "o.csi", NodeID: "o"}
	drivers, changed := putCSINodeDriver([]storagev1.CSINodeDriver{other}, d)
	if !changed || len(drivers) != 2 || drivers[1].Name != "a.csi" {
		t.Fatalf("put new = %v %+v", changed, drivers)
	}
	if _, changed := putCSINodeDriver(drivers, d); changed {
		t.Error("putting the same entry changed the drivers")
	}
	d2 := d
	d2.NodeID = "id2"
	if out, changed := putCSINodeDriver(drivers, d2); !changed || len(out) != 2 || out[1].NodeID != "id2" || drivers[1].NodeID != "id" {
		t.Errorf("replace = %v %+v (input %+v)", changed, out, drivers)
	}
	if out, removed := removeCSINodeDriver(drivers, "a.csi"); !removed || len(out) != 1 || out[0].Name != "o.csi" || len(drivers) != 2 {
		t.Errorf("remove = %v %+v", removed, out)
	}
	if _, removed := removeCSINodeDriver(drivers, "x.csi"); removed {
		t.Error("removed an absent driver")
	}
}

func TestValidateVersions(t *testing.T) {
	for _, tc := range []struct {
		versions []string
		want     string // highest version, or "" for an error
	}{
		{[]string{"1.0.0"}, "1.0.0"},
		{[]string{"v1.2.0", "1.10.0", "2.0.0", "0.3.0"}, "1.10.0"},
		{[]string{"0.3.0", "2.0"}, ""},
		{[]string{"garbage"}, ""},
		{nil, ""},
	} {
		v, err := validateVersions(tc.versions)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%v: accepted as %v", tc.versions, v)
		case tc.want != "" && (err != nil || v.String() != tc.want):
			t.Errorf("%v = %v %v, want %s", tc.versions, v, err, tc.want)
		}
	}
}
