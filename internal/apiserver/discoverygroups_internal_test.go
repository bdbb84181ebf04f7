package apiserver

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/discovery"
)

// recordingGroups is a discovery.GroupManager that records what it is told to add and
// remove (nothing else is asked of it).
type recordingGroups struct {
	discovery.GroupManager
	groups map[string]metav1.APIGroup
	calls  []string
}

func (r *recordingGroups) AddGroup(g metav1.APIGroup) {
	r.groups[g.Name] = g
	r.calls = append(r.calls, "add "+g.Name+" "+g.PreferredVersion.Version)
}
func (r *recordingGroups) RemoveGroup(name string) {
	delete(r.groups, name)
	r.calls = append(r.calls, "remove "+name)
}

func discoveryGroup(name, version string) metav1.APIGroup {
	v := metav1.GroupVersionForDiscovery{GroupVersion: name + "/" + version, Version: version}
	return metav1.APIGroup{Name: name, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v}
}

// TestListedGroups: CRD groups and aggregated groups are listed, an aggregated one over a
// CRD one of the same name (and the CRD one back when the APIService goes); the
// server's own groups are never touched; unchanged entries are not written again.
func TestListedGroups(t *testing.T) {
	target := &recordingGroups{groups: map[string]metav1.APIGroup{"apps": discoveryGroup("apps", "v1")}}
	l := newListedGroups(target, sets.New("apps"))
	step := func(name string, do func(), want []string) {
		t.Helper()
		target.calls = nil
		do()
		if !reflect.DeepEqual(target.calls, want) {
			t.Errorf("%s: %q, want %q", name, target.calls, want)
		}
	}
	step("CRDs", func() {
		l.setCustom(map[string]metav1.APIGroup{"stable.example.com": discoveryGroup("stable.example.com", "v1"), "apps": discoveryGroup("apps", "v9")})
	}, []string{"add stable.example.com v1"})
	step("an APIService over a CRD group", func() {
		l.setAggregated(map[string]metav1.APIGroup{"stable.example.com": discoveryGroup("stable.example.com", "v2"), "wardle.example.com": discoveryGroup("wardle.example.com", "v1alpha1")})
	}, []string{"add stable.example.com v2", "add wardle.example.com v1alpha1"})
	step("the same again", func() {
		l.setAggregated(map[string]metav1.APIGroup{"stable.example.com": discoveryGroup("stable.example.com", "v2"), "wardle.example.com": discoveryGroup("wardle.example.com", "v1alpha1")})
	}, nil)
	step("the APIServices gone", func() { l.setAggregated(nil) }, []string{"remove wardle.example.com", "add stable.example.com v1"})
	step("the CRDs gone", func() { l.setCustom(nil) }, []string{"remove stable.example.com"})
	if !reflect.DeepEqual(target.groups, map[string]metav1.APIGroup{"apps": discoveryGroup("apps", "v1")}) {
		t.Errorf("left: %v, want the server's own apps only", target.groups)
	}
}
