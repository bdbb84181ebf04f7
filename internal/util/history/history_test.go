package history

import (
	"encoding/json"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/ptr"
)

func daemonSet(image string) *appsv1.DaemonSet {
	l := map[string]string{"app": "agent"}
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "ns", Generation: 4},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: l},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: image}}}}}}
}

func TestHash(t *testing.T) {
	a, b := daemonSet("agent:1"), daemonSet("agent:2")
	if Hash(&a.Spec.Template, nil) == Hash(&b.Spec.Template, nil) {
		t.Error("different templates hash alike")
	}
	if Hash(&a.Spec.Template, nil) != Hash(&daemonSet("agent:1").Spec.Template, nil) {
		t.Error("equal templates hash differently")
	}
	if Hash(&a.Spec.Template, nil) == Hash(&a.Spec.Template, ptr.To[int32](1)) {
		t.Error("a collision count does not change the hash")
	}
}

// The patch holds only the template, marked to replace, and puts it back when applied.
func TestTemplatePatch(t *testing.T) {
	old := daemonSet("agent:1")
	patch, err := TemplatePatch(old)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]map[string]map[string]any
	if err := json.Unmarshal(patch, &got); err != nil || len(got) != 1 || len(got["spec"]) != 1 || got["spec"]["template"]["$patch"] != "replace" {
		t.Fatalf("patch %s (%v)", patch, err)
	}
	again, _ := TemplatePatch(daemonSet("agent:1"))
	if string(again) != string(patch) {
		t.Errorf("equal templates give different data:\n%s\n%s", patch, again)
	}
	cur := daemonSet("agent:2")
	cur.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
	curJSON, _ := json.Marshal(cur)
	rolled, err := strategicpatch.StrategicMergePatch(curJSON, patch, &appsv1.DaemonSet{})
	if err != nil {
		t.Fatal(err)
	}
	var back appsv1.DaemonSet
	if err := json.Unmarshal(rolled, &back); err != nil {
		t.Fatal(err)
	}
	if c := back.Spec.Template.Spec.Containers[0]; c.Image != "agent:1" || len(c.Env) != 0 {
		t.Errorf("rolled back container %+v, want agent:1 without env", c)
	}
	if _, err := TemplatePatch(&corev1.Pod{}); err == nil {
		t.Error("an object without spec.template gives a patch")
	}
}

func TestRevisionOrder(t *testing.T) {
	r := func(name string, n int64) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name}, Revision: n}
	}
	revs := []*appsv1.ControllerRevision{r("c", 3), r("a", 1), r("b", 2)}
	if MaxRevision(revs) != 3 || MaxRevision(nil) != 0 {
		t.Errorf("MaxRevision = %d", MaxRevision(revs))
	}
	SortByRevision(revs)
	if revs[0].Name != "a" || revs[2].Name != "c" {
		t.Errorf("order %s %s %s", revs[0].Name, revs[1].Name, revs[2].Name)
	}
}

func TestToDelete(t *testing.T) {
	rev := func(name string, n int64) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name}, Revision: n}
	}
	old := []*appsv1.ControllerRevision{rev("d", 4), rev("a", 1), rev("c", 3), rev("b", 2)}
	names := func(rs []*appsv1.ControllerRevision) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Name)
		}
		return out
	}
	live := func(in ...string) func(*appsv1.ControllerRevision) bool {
		return func(r *appsv1.ControllerRevision) bool { return slices.Contains(in, r.Name) }
	}
	if got := names(ToDelete(old, live("a"), 2)); !slices.Equal(got, []string{"b"}) {
		t.Errorf("limit 2 with a live: delete %v, want [b]", got)
	}
	if got := ToDelete(old, live(), 10); got != nil {
		t.Errorf("under the limit: delete %v", names(got))
	}
	if got := names(ToDelete(old, live(), 0)); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Errorf("limit 0: delete %v", got)
	}
}
