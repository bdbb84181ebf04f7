package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Color, type: string, jsonPath: .spec.color}
    schema: &schema
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer, minimum: 1, maximum: 10}
              color: {type: string, default: blue}
              replicas: {type: integer}
            x-kubernetes-validations:
            - rule: "self.size < 9 || self.color == 'red'"
              message: "big widgets must be red"
          status:
            type: object
            properties:
              replicas: {type: integer}
              ready: {type: boolean}
  - name: v1beta1
    served: true
    storage: false
    schema: *schema
`

// testCustomResources: a CRD with a structural schema, defaulting, CEL rules, printer
// columns, status and scale, served in two versions, through kubectl; its schemas
// published in the OpenAPI documents while it is there.
func testCustomResources(t *testing.T, s *apiservertest.Server, k kubectl) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	k.run("apply", "-f", write("crd.yaml", widgetCRD))
	k.run("wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=60s")
	// Discovery knows the kind once the CRD is established: kubectl finds it by its
	// short name.
	testutil.EventuallyWithin(t, waitTimeout, "widgets in discovery", func() bool {
		out, err := k.cmd(context.Background(), "get", "wd").CombinedOutput()
		return err == nil || strings.Contains(string(out), "No resources found")
	})

	// The served versions' schemas are published in /openapi/v3 and /openapi/v2, and
	// kubectl explain reads them.
	for _, v := range []string{"v1", "v1beta1"} {
		testutil.EventuallyWithin(t, waitTimeout, "widgets "+v+" in /openapi/v3", func() error { return widgetInOpenAPIV3(s, v) })
		testutil.EventuallyWithin(t, waitTimeout, "widgets "+v+" in /openapi/v2", func() error { return widgetInOpenAPIV2(s, v) })
	}
	expectLines(t, k.run("explain", "widgets.spec.size"), "GROUP:      example.com", "KIND:       Widget", "FIELD: size <integer>")

	k.run("apply", "-f", write("w1.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: 3, replicas: 1}\n"))
	expectLines(t, k.run("get", "widgets"), "NAME   SIZE   COLOR", "w1     3      blue")

	for _, c := range []struct{ body, want string }{
		{"spec: {size: 30}", "spec.size: Invalid value: 30: spec.size in body should be less than or equal to 10"},
		{"spec: {size: 9}", "spec: Invalid value: big widgets must be red"},
		{"spec: {color: red}", "spec.size: Required value"},
		{"spec: {size: 2, shape: round}", `unknown field "spec.shape"`},
	} {
		out, err := k.cmd(context.Background(), "apply", "-f",
			write("bad.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: bad}\n"+c.body+"\n")).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("apply %s: err %v, output lacks %q:\n%s", c.body, err, c.want, out)
		}
	}
	if out, err := k.cmd(context.Background(), "get", "widget", "bad").CombinedOutput(); err == nil {
		t.Errorf("a refused widget was stored:\n%s", out)
	}

	// Without validation the unknown field is pruned by the server, not stored.
	k.run("apply", "--validate=false", "-f", write("w2.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w2}\nspec: {size: 2, shape: round}\n"))
	if out := k.run("get", "widget", "w2", "-o", "jsonpath={.spec}"); strings.Contains(out, "shape") || !strings.Contains(out, `"color":"blue"`) {
		t.Errorf("w2's spec = %s, want shape pruned and color defaulted", out)
	}
	if out := k.run("get", "widgets.v1beta1.example.com", "w1", "-o", "jsonpath={.apiVersion}"); out != "example.com/v1beta1" {
		t.Errorf("w1 read in v1beta1 has apiVersion %q", out)
	}
	k.run("patch", "widget", "w1", "--subresource=status", "--type=merge", "-p", `{"status":{"ready":true}}`)
	k.run("scale", "widget", "w1", "--replicas=3")
	if out := k.run("get", "widget", "w1", "-o", "jsonpath={.spec.replicas} {.status.ready}"); out != "3 true" {
		t.Errorf("after scale and status patch: %q, want \"3 true\"", out)
	}

	k.run("delete", "crd", "widgets.example.com", "--timeout=60s")
	testutil.EventuallyWithin(t, waitTimeout, "widgets gone from discovery", func() bool {
		out, _ := k.cmd(context.Background(), "api-resources", "--api-group=example.com", "-o", "name").CombinedOutput()
		return strings.TrimSpace(string(out)) == ""
	})
	testutil.EventuallyWithin(t, waitTimeout, "widgets gone from /openapi/v3 and v2", func() bool {
		return widgetInOpenAPIV3(s, "v1") != nil && widgetInOpenAPIV2(s, "v1") != nil
	})
}

// widgetSchemaPublished says why def (the Widget definition of version v, as JSON) is
// not the published one: marked with its group, version and kind, with the CRD's
// schema.
func widgetSchemaPublished(def map[string]any, v string) error {
	gvk, _ := json.Marshal(def["x-kubernetes-group-version-kind"])
	if want := `[{"group":"example.com","kind":"Widget","version":"` + v + `"}]`; string(gvk) != want {
		return fmt.Errorf("x-kubernetes-group-version-kind %s, want %s", gvk, want)
	}
	props, _ := def["properties"].(map[string]any)
	spec, _ := props["spec"].(map[string]any)
	specProps, _ := spec["properties"].(map[string]any)
	if size, _ := specProps["size"].(map[string]any); size["type"] != "integer" {
		return fmt.Errorf("spec's properties %v, want size an integer", specProps)
	}
	return nil
}

// widgetInOpenAPIV2 says why /openapi/v2 lacks the Widget of version v.
func widgetInOpenAPIV2(s *apiservertest.Server, v string) error {
	raw, err := s.Client.Discovery().RESTClient().Get().AbsPath("/openapi/v2").DoRaw(context.Background())
	if err != nil {
		return err
	}
	var doc struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return err
	}
	def, ok := doc.Definitions["com.example."+v+".Widget"]
	if !ok {
		return fmt.Errorf("no definition com.example.%s.Widget", v)
	}
	return widgetSchemaPublished(def, v)
}

// widgetInOpenAPIV3 says why /openapi/v3 does not list apis/example.com/<v> with the
// Widget of version v.
func widgetInOpenAPIV3(s *apiservertest.Server, v string) error {
	rc := s.Client.Discovery().RESTClient()
	raw, err := rc.Get().AbsPath("/openapi/v3").DoRaw(context.Background())
	if err != nil {
		return err
	}
	var paths struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(raw, &paths); err != nil {
		return err
	}
	gv, ok := paths.Paths["apis/example.com/"+v]
	if !ok {
		return fmt.Errorf("/openapi/v3 does not list apis/example.com/%s", v)
	}
	u, err := url.Parse(gv.ServerRelativeURL)
	if err != nil {
		return err
	}
	req := rc.Get().AbsPath(u.Path)
	for k, vals := range u.Query() {
		req = req.Param(k, vals[0])
	}
	if raw, err = req.DoRaw(context.Background()); err != nil {
		return err
	}
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return err
	}
	def, ok := doc.Components.Schemas["com.example."+v+".Widget"]
	if !ok {
		return fmt.Errorf("apis/example.com/%s has no schema com.example.%s.Widget", v, v)
	}
	return widgetSchemaPublished(def, v)
}

// testApplyPrune: kubectl apply --prune with a label selector and no allowlist deletes
// what the manifests no longer hold, which needs every kind of kubectl's default
// prune list served.
func testApplyPrune(t *testing.T, k kubectl) {
	dir := t.TempDir()
	cm := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", labels: {app: prune-test}}\ndata: {k: v}\n"
	}
	for _, n := range []string{"keep", "drop"} {
		if err := os.WriteFile(filepath.Join(dir, n+".yaml"), []byte(cm("prune-"+n)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	k.run("apply", "--prune", "-l", "app=prune-test", "-f", dir)
	if err := os.Remove(filepath.Join(dir, "drop.yaml")); err != nil {
		t.Fatal(err)
	}
	out := k.run("apply", "--prune", "-l", "app=prune-test", "-f", dir)
	expectLines(t, out, "configmap/prune-drop pruned", "configmap/prune-keep unchanged")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if got, err := k.cmd(ctx, "get", "configmap", "prune-drop").CombinedOutput(); err == nil {
		t.Errorf("prune-drop still exists:\n%s", got)
	}
}
