package admission_test

import (
	"context"
	"errors"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// TestMutatingAdmissionPolicy: a bound policy's apply configuration and JSON patch
// mutate the Deployments of the namespace it selects, and only those.
func TestMutatingAdmissionPolicy(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	ns := newNamespace(t, s)
	policies := s.Client.AdmissionregistrationV1().MutatingAdmissionPolicies()
	bindings := s.Client.AdmissionregistrationV1().MutatingAdmissionPolicyBindings()
	p, err := policies.Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: uniqueName("annotate")},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
					},
				}},
			},
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{
					Expression: `Object{metadata: Object.metadata{annotations: {"mutated-by": "admission-policy"}}}`,
				},
			}, {
				PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{
					Expression: `[JSONPatch{op: "replace", path: "/spec/replicas", value: 2}]`,
				},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = policies.Delete(ctx, p.Name, metav1.DeleteOptions{}) })
	if got := ptr.Deref(p.Spec.FailurePolicy, ""); got != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy defaulted to %q, want Fail", got)
	}
	b, err := bindings.Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: uniqueName("annotate-binding")},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{
			PolicyName:     p.Name,
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: scopeSelector(ns)},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bindings.Delete(ctx, b.Name, metav1.DeleteOptions{}) })

	deployments := s.Client.AppsV1().Deployments(ns)
	testutil.Eventually(t, "the policy mutates a Deployment", func() error {
		d, err := deployments.Create(ctx, deployment(uniqueName("probe"), 5), dryRun)
		if err != nil {
			return err
		}
		if d.Annotations["mutated-by"] != "admission-policy" || ptr.Deref(d.Spec.Replicas, 0) != 2 {
			return errors.New("not mutated yet")
		}
		return nil
	})
	d, err := deployments.Create(ctx, deployment("five", 5), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Annotations["mutated-by"] != "admission-policy" || *d.Spec.Replicas != 2 {
		t.Errorf("stored deployment: annotations %v, replicas %d; want mutated-by and 2", d.Annotations, *d.Spec.Replicas)
	}
	// A namespace the binding does not select is left alone.
	other, err := s.Client.AppsV1().Deployments(newNamespace(t, s)).Create(ctx, deployment("five", 5), dryRun)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := other.Annotations["mutated-by"]; ok || *other.Spec.Replicas != 5 {
		t.Errorf("deployment in an unselected namespace was mutated: %v, replicas %d", other.Annotations, *other.Spec.Replicas)
	}
}
