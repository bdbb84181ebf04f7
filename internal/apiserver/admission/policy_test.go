package admission_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

const replicasMessage = "replicas must be no greater than 5"

// maxReplicasPolicy is the policy `object.spec.replicas <= 5` on Deployments.
func maxReplicasPolicy(name string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
					},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.spec.replicas <= 5", Message: replicasMessage}},
		},
	}
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}},
			},
		},
	}
}

func TestValidatingAdmissionPolicy(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	policies := s.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	bindings := s.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()

	// bind binds a new max-replicas policy to namespace ns with actions.
	bind := func(t *testing.T, ns string, actions ...admissionregistrationv1.ValidationAction) (policy, binding string) {
		t.Helper()
		p, err := policies.Create(ctx, maxReplicasPolicy(uniqueName("max-replicas")), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = policies.Delete(ctx, p.Name, metav1.DeleteOptions{}) })
		if got := ptr.Deref(p.Spec.FailurePolicy, ""); got != admissionregistrationv1.Fail {
			t.Errorf("failurePolicy defaulted to %q, want Fail", got)
		}
		b, err := bindings.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: uniqueName("max-replicas-binding")},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName: p.Name, ValidationActions: actions,
				MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: scopeSelector(ns)},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = bindings.Delete(ctx, b.Name, metav1.DeleteOptions{}) })
		return p.Name, b.Name
	}

	t.Run("Deny", func(t *testing.T) {
		ns := newNamespace(t, s)
		policy, binding := bind(t, ns, admissionregistrationv1.Deny)
		deployments := s.Client.AppsV1().Deployments(ns)
		testutil.Eventually(t, "policy denies 6 replicas", func() error {
			_, err := deployments.Create(ctx, deployment(uniqueName("probe"), 6), dryRun)
			if err == nil {
				return errors.New("6 replicas still allowed")
			}
			return nil
		})
		_, err := deployments.Create(ctx, deployment("six", 6), metav1.CreateOptions{})
		want := fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s", policy, binding, replicasMessage)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Fatalf("create with 6 replicas: got %v, want 422 Invalid saying %q", err, want)
		}
		if _, err := deployments.Get(ctx, "six", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("denied deployment was stored: %v", err)
		}
		if _, err := deployments.Create(ctx, deployment("five", 5), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create with 5 replicas: %v", err)
		}
		// Updates are matched too.
		d, err := deployments.Get(ctx, "five", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d.Spec.Replicas = ptr.To[int32](7)
		if _, err := deployments.Update(ctx, d, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), replicasMessage) {
			t.Errorf("update to 7 replicas: got %v, want the policy's denial", err)
		}
		// Other namespaces are not bound.
		other := newNamespace(t, s)
		if _, err := s.Client.AppsV1().Deployments(other).Create(ctx, deployment("six", 6), dryRun); err != nil {
			t.Errorf("create in a namespace the binding does not select: %v", err)
		}
	})

	t.Run("Warn", func(t *testing.T) {
		ns := newNamespace(t, s)
		policy, binding := bind(t, ns, admissionregistrationv1.Warn)
		client, warnings := clientWithWarnings(t, s)
		deployments := client.AppsV1().Deployments(ns)
		want := fmt.Sprintf("Validation failed for ValidatingAdmissionPolicy '%s' with binding '%s': %s", policy, binding, replicasMessage)
		testutil.Eventually(t, "policy warns about 6 replicas", func() error {
			if _, err := deployments.Create(ctx, deployment(uniqueName("probe"), 6), dryRun); err != nil {
				return fmt.Errorf("a Warn binding refused the request: %w", err)
			}
			select {
			case w := <-warnings:
				if w != want {
					return fmt.Errorf("warning %q, want %q", w, want)
				}
				return nil
			case <-time.After(10 * time.Millisecond):
				return errors.New("no warning yet")
			}
		})
		if _, err := deployments.Create(ctx, deployment("six", 6), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create with 6 replicas under Warn: %v", err)
		}
		select {
		case w := <-warnings:
			if w != want {
				t.Errorf("warning %q, want %q", w, want)
			}
		default:
			t.Errorf("no warning for the stored 6-replica deployment")
		}
	})

	// Status is written through /status only, as the type checker upstream writes it.
	t.Run("Status", func(t *testing.T) {
		p, err := policies.Create(ctx, maxReplicasPolicy(uniqueName("status")), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = policies.Delete(ctx, p.Name, metav1.DeleteOptions{}) })
		p.Status.ObservedGeneration = p.Generation
		p.Status.TypeChecking = &admissionregistrationv1.TypeChecking{}
		if p, err = policies.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		p.Status = admissionregistrationv1.ValidatingAdmissionPolicyStatus{}
		p.Spec.Validations[0].Message = "changed"
		if p, err = policies.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if p.Status.ObservedGeneration != 1 || p.Status.TypeChecking == nil || p.Generation != 2 {
			t.Errorf("after a spec update: generation %d, status %+v; want generation 2 and the status kept", p.Generation, p.Status)
		}
	})

	// The API refuses policies and bindings users get wrong, with field errors.
	t.Run("Validation", func(t *testing.T) {
		p := maxReplicasPolicy(uniqueName("bad"))
		p.Spec.Validations = []admissionregistrationv1.Validation{{Expression: ""}, {Expression: "object.spec.replicas <="}}
		_, err := policies.Create(ctx, p, metav1.CreateOptions{})
		assertFieldErrors(t, err, "spec.validations[0].expression", "spec.validations[1].expression")

		b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: uniqueName("bad")}}
		_, err = bindings.Create(ctx, b, metav1.CreateOptions{})
		assertFieldErrors(t, err, "spec.policyName", "spec.validationActions")
	})
}

// assertFieldErrors checks err is a 422 Invalid whose causes name exactly fields.
func assertFieldErrors(t *testing.T, err error, fields ...string) {
	t.Helper()
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		t.Fatalf("got %v, want 422 Invalid", err)
	}
	got := map[string]bool{}
	for _, c := range status.Status().Details.Causes {
		got[c.Field] = true
	}
	for _, f := range fields {
		if !got[f] {
			t.Errorf("no error for %s in %v", f, err)
		}
	}
	if len(got) != len(fields) {
		t.Errorf("errors for %v, want only %v", got, fields)
	}
}
