package apiserver

import (
	"reflect"
	"sort"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// errorFields are the "field: type" pairs of errs, sorted.
func errorFields(errs field.ErrorList) []string {
	out := []string{}
	for _, e := range errs {
		out = append(out, e.Field+": "+string(e.Type))
	}
	sort.Strings(out)
	return out
}

// goodWebhook is a validating webhook as a user writes it, defaulted as the server does.
func goodWebhook() admissionregistrationv1.ValidatingWebhook {
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{Webhooks: []admissionregistrationv1.ValidatingWebhook{{
		Name:         "check.example.com",
		ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:8443/validate")},
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
		}},
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
	}}}
	s := runtime.NewScheme()
	addAdmissionRegistrationDefaults(s)
	s.Default(cfg)
	return cfg.Webhooks[0]
}

func TestValidateWebhooks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(h *admissionregistrationv1.ValidatingWebhook)
		want   []string
	}{
		{"valid", func(h *admissionregistrationv1.ValidatingWebhook) {}, []string{}},
		{"service reference", func(h *admissionregistrationv1.ValidatingWebhook) {
			h.ClientConfig = admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
				Namespace: "cert-manager", Name: "cert-manager-webhook", Path: ptr.To("/validate"), Port: ptr.To[int32](443)}}
		}, []string{}},
		{"name not fully qualified", func(h *admissionregistrationv1.ValidatingWebhook) { h.Name = "check" },
			[]string{"webhooks[0].name: FieldValueInvalid"}},
		{"both url and service", func(h *admissionregistrationv1.ValidatingWebhook) {
			h.ClientConfig.Service = &admissionregistrationv1.ServiceReference{Namespace: "a", Name: "b"}
		}, []string{"webhooks[0].clientConfig: FieldValueRequired"}},
		{"neither url nor service", func(h *admissionregistrationv1.ValidatingWebhook) { h.ClientConfig.URL = nil },
			[]string{"webhooks[0].clientConfig: FieldValueRequired"}},
		{"http url", func(h *admissionregistrationv1.ValidatingWebhook) { h.ClientConfig.URL = ptr.To("http://127.0.0.1/x") },
			[]string{"webhooks[0].clientConfig.url: FieldValueInvalid"}},
		{"service without name", func(h *admissionregistrationv1.ValidatingWebhook) {
			h.ClientConfig = admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "a"}}
		}, []string{"webhooks[0].clientConfig.service.name: FieldValueRequired"}},
		{"no sideEffects", func(h *admissionregistrationv1.ValidatingWebhook) { h.SideEffects = nil },
			[]string{"webhooks[0].sideEffects: FieldValueRequired"}},
		{"sideEffects Some", func(h *admissionregistrationv1.ValidatingWebhook) {
			h.SideEffects = ptr.To(admissionregistrationv1.SideEffectClassSome)
		}, []string{"webhooks[0].sideEffects: FieldValueNotSupported"}},
		{"no admissionReviewVersions", func(h *admissionregistrationv1.ValidatingWebhook) { h.AdmissionReviewVersions = nil },
			[]string{"webhooks[0].admissionReviewVersions: FieldValueRequired"}},
		{"unknown admissionReviewVersions", func(h *admissionregistrationv1.ValidatingWebhook) { h.AdmissionReviewVersions = []string{"v2"} },
			[]string{"webhooks[0].admissionReviewVersions: FieldValueInvalid"}},
		{"unknown failurePolicy", func(h *admissionregistrationv1.ValidatingWebhook) {
			h.FailurePolicy = ptr.To(admissionregistrationv1.FailurePolicyType("Sometimes"))
		}, []string{"webhooks[0].failurePolicy: FieldValueNotSupported"}},
		{"timeout too long", func(h *admissionregistrationv1.ValidatingWebhook) { h.TimeoutSeconds = ptr.To[int32](31) },
			[]string{"webhooks[0].timeoutSeconds: FieldValueInvalid"}},
		{"rule without operations and resources", func(h *admissionregistrationv1.ValidatingWebhook) {
			h.Rules[0].Operations, h.Rules[0].Resources = nil, nil
		}, []string{"webhooks[0].rules[0].operations: FieldValueRequired", "webhooks[0].rules[0].resources: FieldValueRequired"}},
		{"match condition that does not compile", func(h *admissionregistrationv1.ValidatingWebhook) {
			h.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "bad", Expression: "object.metadata.name =="}}
		}, []string{"webhooks[0].matchConditions[0].expression: FieldValueInvalid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := goodWebhook()
			tc.change(&h)
			if got := errorFields(validateValidatingWebhooks([]admissionregistrationv1.ValidatingWebhook{h})); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("errors %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("duplicate names", func(t *testing.T) {
		got := errorFields(validateValidatingWebhooks([]admissionregistrationv1.ValidatingWebhook{goodWebhook(), goodWebhook()}))
		if want := []string{"webhooks[1].name: FieldValueDuplicate"}; !reflect.DeepEqual(got, want) {
			t.Errorf("errors %v, want %v", got, want)
		}
	})
}

func goodPolicy() *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "max-replicas"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.spec.replicas <= 5", Message: "too many"}},
		},
	}
	s := runtime.NewScheme()
	addAdmissionRegistrationDefaults(s)
	s.Default(p)
	return p
}

func TestValidateValidatingAdmissionPolicy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(p *admissionregistrationv1.ValidatingAdmissionPolicy)
		want   []string
	}{
		{"valid", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {}, []string{}},
		{"variables and message expression", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.Variables = []admissionregistrationv1.Variable{{Name: "limit", Expression: "5"}}
			p.Spec.Validations[0] = admissionregistrationv1.Validation{Expression: "object.spec.replicas <= variables.limit",
				MessageExpression: "'at most ' + string(variables.limit)"}
		}, []string{}},
		{"no expression", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) { p.Spec.Validations[0].Expression = " " },
			[]string{"spec.validations[0].expression: FieldValueRequired"}},
		{"expression that does not compile", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.Validations[0].Expression = "object.spec.replicas <="
		}, []string{"spec.validations[0].expression: FieldValueInvalid"}},
		{"expression that is not a bool", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.Validations[0].Expression = "'yes'"
		}, []string{"spec.validations[0].expression: FieldValueInvalid"}},
		{"undeclared variable", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.Validations[0].Expression = "params.max > 1"
		}, []string{"spec.validations[0].expression: FieldValueInvalid"}},
		{"no validations", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) { p.Spec.Validations = nil },
			[]string{"spec.auditAnnotations: FieldValueRequired", "spec.validations: FieldValueRequired"}},
		{"message with a line break", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) { p.Spec.Validations[0].Message = "a\nb" },
			[]string{"spec.validations[0].message: FieldValueInvalid"}},
		{"no match constraints", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) { p.Spec.MatchConstraints = nil },
			[]string{"spec.matchConstraints: FieldValueRequired"}},
		{"no resource rules", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.MatchConstraints.ResourceRules = nil
		},
			[]string{"spec.matchConstraints.resourceRules: FieldValueRequired"}},
		{"no failurePolicy", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) { p.Spec.FailurePolicy = nil },
			[]string{"spec.failurePolicy: FieldValueRequired"}},
		{"bad paramKind", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "a/b/c"}
		}, []string{"spec.paramKind.apiVersion: FieldValueInvalid", "spec.paramKind.kind: FieldValueRequired"}},
		{"bad variable name", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.Variables = []admissionregistrationv1.Variable{{Name: "for", Expression: "1"}}
		}, []string{"spec.variables[0].name: FieldValueInvalid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := goodPolicy()
			tc.change(p)
			if got := errorFields(validateValidatingAdmissionPolicySpec(p)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("errors %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidateValidatingAdmissionPolicyBinding(t *testing.T) {
	deny, warn := admissionregistrationv1.Deny, admissionregistrationv1.Warn
	for _, tc := range []struct {
		name string
		spec admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec
		want []string
	}{
		{"valid", admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p",
			ValidationActions: []admissionregistrationv1.ValidationAction{deny, admissionregistrationv1.Audit}}, []string{}},
		{"no policy name", admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			ValidationActions: []admissionregistrationv1.ValidationAction{deny}}, []string{"spec.policyName: FieldValueRequired"}},
		{"no actions", admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p"},
			[]string{"spec.validationActions: FieldValueRequired"}},
		{"duplicate action", admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p",
			ValidationActions: []admissionregistrationv1.ValidationAction{deny, deny}}, []string{"spec.validationActions[1]: FieldValueDuplicate"}},
		{"Deny and Warn", admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p",
			ValidationActions: []admissionregistrationv1.ValidationAction{deny, warn}}, []string{"spec.validationActions: FieldValueInvalid"}},
		{"unknown action", admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p",
			ValidationActions: []admissionregistrationv1.ValidationAction{"Shout"}}, []string{"spec.validationActions[0]: FieldValueNotSupported"}},
		{"paramRef without name, selector and action", admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p",
			ParamRef: &admissionregistrationv1.ParamRef{}, ValidationActions: []admissionregistrationv1.ValidationAction{deny}},
			[]string{"spec.paramRef.parameterNotFoundAction: FieldValueRequired", "spec.paramRef: FieldValueRequired"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := errorFields(validateValidatingAdmissionPolicyBindingSpec(&tc.spec, field.NewPath("spec"))); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("errors %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAdmissionRegistrationDefaults(t *testing.T) {
	h := goodWebhook()
	if *h.FailurePolicy != admissionregistrationv1.Fail || *h.MatchPolicy != admissionregistrationv1.Equivalent ||
		h.NamespaceSelector == nil || h.ObjectSelector == nil || *h.TimeoutSeconds != 10 ||
		*h.Rules[0].Scope != admissionregistrationv1.AllScopes {
		t.Errorf("webhook defaults: %+v", h)
	}
	p := goodPolicy()
	m := p.Spec.MatchConstraints
	if *p.Spec.FailurePolicy != admissionregistrationv1.Fail || *m.MatchPolicy != admissionregistrationv1.Equivalent ||
		m.NamespaceSelector == nil || m.ObjectSelector == nil {
		t.Errorf("policy defaults: %+v", p.Spec)
	}
}
