package admission_test

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// TestKubectlApply: the admissionregistration kinds work with kubectl as on any
// cluster: client-side and server-side apply (which need their OpenAPI schemas), field
// validation of unknown fields, the table columns and explain.
func TestKubectlApply(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	argv := testutil.Kubectl(t)
	kubectl := func(stdin string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, argv[0], append(append(argv[1:], "--kubeconfig", s.Kubeconfig), args...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG=", "KUBECTL_KUBERC=false")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	policy, binding, hook := uniqueName("replicas"), uniqueName("replicas-binding"), uniqueName("hook")
	manifest := func(limit string) string {
		return `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: ` + policy + `
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["deployments"]
  validations:
  - expression: "object.spec.replicas <= ` + limit + `"
    message: "too many replicas"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: ` + binding + `
spec:
  policyName: ` + policy + `
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels:
        scope: nowhere
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: ` + hook + `
webhooks:
- name: check.kubelab.test
  clientConfig:
    service:
      namespace: default
      name: nowhere
      path: /validate
  rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["CREATE"]
    resources: ["configmaps"]
  namespaceSelector:
    matchLabels:
      scope: nowhere
  sideEffects: None
  admissionReviewVersions: ["v1"]
`
	}
	if out, err := kubectl(manifest("5"), "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	if out, err := kubectl(manifest("7"), "apply", "--server-side", "--force-conflicts", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply --server-side: %v\n%s", err, out)
	}
	out, err := kubectl("", "get", "validatingadmissionpolicy", policy, "-o", "jsonpath={.spec.validations[0].expression} {.spec.failurePolicy}")
	if err != nil || out != "object.spec.replicas <= 7 Fail" {
		t.Errorf("policy after server-side apply: %q (%v), want the new expression and failurePolicy Fail", out, err)
	}
	out, err = kubectl("", "get", "validatingwebhookconfiguration", hook, "-o", "jsonpath={.webhooks[0].clientConfig.service.port}")
	if err != nil || out != "443" {
		t.Errorf("service port: %q (%v), want the default 443", out, err)
	}
	out, err = kubectl("", "get", "validatingadmissionpolicies,validatingadmissionpolicybindings,validatingwebhookconfigurations")
	if err != nil {
		t.Fatalf("kubectl get: %v\n%s", err, out)
	}
	for _, want := range []string{`NAME\s+VALIDATIONS\s+PARAMKIND\s+AGE`, policy + `\s+1\s+<unset>`,
		`NAME\s+POLICYNAME\s+PARAMREF\s+AGE`, binding + `\s+` + policy + `\s+<unset>`, `NAME\s+WEBHOOKS\s+AGE`, hook + `\s+1`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("kubectl get has no %q:\n%s", want, out)
		}
	}

	bad := strings.Replace(manifest("5"), "  validations:", "  validashuns:", 1)
	if out, err := kubectl(bad, "apply", "--server-side", "-f", "-"); err == nil || !strings.Contains(out, "validashuns") {
		t.Errorf("server-side apply with an unknown field: %v\n%s", err, out)
	}
	out, err = kubectl("", "explain", "validatingadmissionpolicybinding.spec.validationActions")
	if err != nil || !strings.Contains(out, "Deny") {
		t.Errorf("kubectl explain: %v\n%s", err, out)
	}
}
