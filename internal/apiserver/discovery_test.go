package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

// notServed are the resources of kube-apiserver v1.37 that kubelab does not serve, each
// with the reason; docs/apiserver.md lists the same.
var notServed = map[string]string{}

// alsoServed are what kubelab serves beyond kube-apiserver: the snapshot kinds (CRDs of
// the external-snapshotter upstream) and metrics.k8s.io (metrics-server's API upstream)
// are built in.
var alsoServed = []string{"snapshot.storage.k8s.io/v1", "metrics.k8s.io/v1beta1"}

// TestAPIGroups checks, on one server, what users' manifests assume of the API: the
// groups discovery lists, custom resources, and kubectl apply --prune.
func TestAPIGroups(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	t.Run("discovery matches kube-apiserver", func(t *testing.T) { testDiscoveryMatchesKubeAPIServer(t, s) })
	k := newKubectl(t, s.Kubeconfig)
	t.Run("custom resources", func(t *testing.T) { k.t = t; testCustomResources(t, s, k) })
	t.Run("apply --prune", func(t *testing.T) { k.t = t; testApplyPrune(t, k) })
}

// testDiscoveryMatchesKubeAPIServer: the aggregated discovery of /api and /apis lists
// every group, version and resource kube-apiserver v1.37.2 lists (testdata, read from
// the binary hack/upstream.sh builds with `kubectl get --raw` and the
// apidiscovery.k8s.io/v2 Accept header) with the same kind, scope, verbs, short names,
// categories and subresources, but for notServed; and nothing else but alsoServed. And
// kubectl api-resources agrees.
func testDiscoveryMatchesKubeAPIServer(t *testing.T, s *apiservertest.Server) {
	want := map[string]string{}
	for _, f := range []string{"api", "apis"} {
		raw, err := os.ReadFile(filepath.Join("testdata", "kube-apiserver-v1.37.2-discovery-"+f+".json"))
		if err != nil {
			t.Fatal(err)
		}
		addDiscovery(t, want, raw)
	}
	got := map[string]string{}
	var aggregatedGroups []string
	for _, path := range []string{"/api", "/apis"} {
		raw, err := s.Client.Discovery().RESTClient().Get().AbsPath(path).
			SetHeader("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList").DoRaw(context.Background())
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		addDiscovery(t, got, raw)
		if path == "/apis" {
			aggregatedGroups = groupVersionsOf(t, raw)
		}
	}
	// The unaggregated /apis (an APIGroupList, which older clients read) lists the same
	// groups and versions, apiextensions.k8s.io among them.
	var legacy metav1.APIGroupList
	if err := s.Client.Discovery().RESTClient().Get().AbsPath("/apis").Do(context.Background()).Into(&legacy); err != nil {
		t.Fatal(err)
	}
	var legacyGroups []string
	for _, g := range legacy.Groups {
		for _, v := range g.Versions {
			legacyGroups = append(legacyGroups, v.GroupVersion)
		}
		// Each group answers /apis/<group> with its versions and a preferred one of them.
		var group metav1.APIGroup
		if err := s.Client.Discovery().RESTClient().Get().AbsPath("/apis/" + g.Name + "/").Do(context.Background()).Into(&group); err != nil {
			t.Errorf("GET /apis/%s/: %v", g.Name, err)
		} else if !slices.Contains(group.Versions, group.PreferredVersion) {
			t.Errorf("/apis/%s/ prefers %v of %v", g.Name, group.PreferredVersion, group.Versions)
		}
	}
	if slices.Sort(legacyGroups); !slices.Equal(legacyGroups, aggregatedGroups) || !slices.Contains(legacyGroups, "apiextensions.k8s.io/v1") {
		t.Errorf("/apis as an APIGroupList lists %v; the aggregated discovery %v", legacyGroups, aggregatedGroups)
	}
	for _, key := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[key]
		_, excused := notServed[key]
		switch {
		case !ok && !excused:
			t.Errorf("%s is not served; kube-apiserver serves %s", key, want[key])
		case ok && excused:
			t.Errorf("%s is served but listed as not served (%s)", key, notServed[key])
		case ok && g != want[key]:
			t.Errorf("%s:\n kubelab         %s\n kube-apiserver  %s", key, g, want[key])
		}
	}
	for _, key := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[key]; !ok && !slices.ContainsFunc(alsoServed, func(gv string) bool { return strings.HasPrefix(key, gv+" ") }) {
			t.Errorf("%s is served, but not by kube-apiserver: %s", key, got[key])
		}
	}

	k := newKubectl(t, s.Kubeconfig)
	out := k.run("api-resources", "-o", "name")
	for key := range want {
		gv, res, _ := strings.Cut(key, " ")
		if strings.Contains(res, "/") || notServed[key] != "" {
			continue
		}
		name := res
		if g, _, ok := strings.Cut(gv, "/"); ok {
			name += "." + g
		}
		if !slices.Contains(strings.Fields(out), name) {
			t.Errorf("kubectl api-resources lacks %s", name)
		}
	}
}

// addDiscovery adds one line per resource and subresource of an APIGroupDiscoveryList:
// "group/version resource[/sub]" → what a client learns of it.
func addDiscovery(t *testing.T, into map[string]string, raw []byte) {
	t.Helper()
	var list apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatalf("discovery: %v", err)
	}
	for _, g := range list.Items {
		for _, v := range g.Versions {
			gv := v.Version
			if g.Name != "" {
				gv = g.Name + "/" + v.Version
			}
			for _, r := range v.Resources {
				kind := ""
				if r.ResponseKind != nil {
					kind = r.ResponseKind.Kind
				}
				into[gv+" "+r.Resource] = fmt.Sprintf("kind=%s scope=%s singular=%s verbs=%v short=%v categories=%v",
					kind, r.Scope, r.SingularResource, sorted(r.Verbs), sorted(r.ShortNames), sorted(r.Categories))
				for _, sub := range r.Subresources {
					subKind := ""
					if sub.ResponseKind != nil {
						subKind = sub.ResponseKind.Group + "/" + sub.ResponseKind.Version + "/" + sub.ResponseKind.Kind
					}
					into[gv+" "+r.Resource+"/"+sub.Subresource] = fmt.Sprintf("kind=%s verbs=%v", subKind, sorted(sub.Verbs))
				}
			}
		}
	}
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

// groupVersionsOf are the group versions of an APIGroupDiscoveryList, sorted.
func groupVersionsOf(t *testing.T, raw []byte) []string {
	t.Helper()
	var list apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatalf("discovery: %v", err)
	}
	var out []string
	for _, g := range list.Items {
		for _, v := range g.Versions {
			out = append(out, g.Name+"/"+v.Version)
		}
	}
	return sorted(out)
}
