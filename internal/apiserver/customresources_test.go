package apiserver_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
// columns, status and scale, served in two versions, through kubectl.
func testCustomResources(t *testing.T, k kubectl) {
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
