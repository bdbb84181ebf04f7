package apiserver

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// admissionRegistrationResources are the rows of admissionregistration.k8s.io/v1: the
// ValidatingAdmissionPolicies (CEL rules) with their bindings and the webhook
// configurations, which the admission chain's ValidatingAdmissionPolicy,
// MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins read through informers.
func admissionRegistrationResources() []resource {
	ar := func(r resource) resource {
		r.group, r.version, r.generation = admissionregistrationv1.GroupName, "v1", true
		return r
	}
	webhookColumns := []metav1.TableColumnDefinition{nameCol(),
		col("Webhooks", "integer", "Webhooks indicates the number of webhooks registered in this configuration"), ageCol()}
	return []resource{
		ar(resource{kind: "MutatingAdmissionPolicy", plural: "mutatingadmissionpolicies", singular: "mutatingadmissionpolicy",
			categories: []string{"api-extensions"},
			newObj:     func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicy{} },
			newList:    func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicyList{} },
			columns: []metav1.TableColumnDefinition{nameCol(),
				col("Mutations", "integer", "The number of mutations of the policy."),
				col("ParamKind", "string", "ParamKind specifies the kind of resources used to parameterize this policy"), ageCol()},
			row: func(o runtime.Object) []interface{} {
				p := o.(*admissionregistrationv1.MutatingAdmissionPolicy)
				paramKind := "<unset>"
				if pk := p.Spec.ParamKind; pk != nil {
					paramKind = pk.APIVersion + "/" + pk.Kind
				}
				return []interface{}{p.Name, int64(len(p.Spec.Mutations)), paramKind, age(p.CreationTimestamp)}
			},
		}),
		ar(resource{kind: "MutatingAdmissionPolicyBinding", plural: "mutatingadmissionpolicybindings", singular: "mutatingadmissionpolicybinding",
			categories: []string{"api-extensions"},
			newObj:     func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicyBinding{} },
			newList:    func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicyBindingList{} },
			columns: []metav1.TableColumnDefinition{nameCol(),
				col("PolicyName", "string", "The policy the binding binds."),
				col("ParamRef", "string", "The param resource of the binding."), ageCol()},
			row: func(o runtime.Object) []interface{} {
				b := o.(*admissionregistrationv1.MutatingAdmissionPolicyBinding)
				return []interface{}{b.Name, b.Spec.PolicyName, paramRefString(b.Spec.ParamRef), age(b.CreationTimestamp)}
			},
		}),
		ar(resource{kind: "ValidatingAdmissionPolicy", plural: "validatingadmissionpolicies", singular: "validatingadmissionpolicy",
			categories: []string{"api-extensions"}, status: true,
			newObj:  func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicy{} },
			newList: func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyList{} },
			columns: []metav1.TableColumnDefinition{nameCol(),
				col("Validations", "integer", "Validations indicates the number of validation rules defined in this configuration"),
				col("ParamKind", "string", "ParamKind specifies the kind of resources used to parameterize this policy"), ageCol()},
			row: func(o runtime.Object) []interface{} {
				p := o.(*admissionregistrationv1.ValidatingAdmissionPolicy)
				paramKind := "<unset>"
				if pk := p.Spec.ParamKind; pk != nil {
					paramKind = pk.APIVersion + "/" + pk.Kind
				}
				return []interface{}{p.Name, int64(len(p.Spec.Validations)), paramKind, age(p.CreationTimestamp)}
			},
			hooks: hooks{validate: func(o runtime.Object) field.ErrorList {
				return validateValidatingAdmissionPolicySpec(o.(*admissionregistrationv1.ValidatingAdmissionPolicy))
			}},
		}),
		ar(resource{kind: "ValidatingAdmissionPolicyBinding", plural: "validatingadmissionpolicybindings", singular: "validatingadmissionpolicybinding",
			categories: []string{"api-extensions"},
			newObj:     func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{} },
			newList:    func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{} },
			columns: []metav1.TableColumnDefinition{nameCol(),
				col("PolicyName", "string", "PolicyName indicates the policy definition which the policy binding binded to"),
				col("ParamRef", "string", "ParamRef indicates the param resource which sets the configration param"), ageCol()},
			row: func(o runtime.Object) []interface{} {
				b := o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
				return []interface{}{b.Name, b.Spec.PolicyName, paramRefString(b.Spec.ParamRef), age(b.CreationTimestamp)}
			},
			hooks: hooks{validate: func(o runtime.Object) field.ErrorList {
				return validateValidatingAdmissionPolicyBindingSpec(&o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding).Spec, field.NewPath("spec"))
			}},
		}),
		ar(resource{kind: "MutatingWebhookConfiguration", plural: "mutatingwebhookconfigurations", singular: "mutatingwebhookconfiguration",
			categories: []string{"api-extensions"},
			newObj:     func() runtime.Object { return &admissionregistrationv1.MutatingWebhookConfiguration{} },
			newList:    func() runtime.Object { return &admissionregistrationv1.MutatingWebhookConfigurationList{} },
			columns:    webhookColumns,
			row: func(o runtime.Object) []interface{} {
				c := o.(*admissionregistrationv1.MutatingWebhookConfiguration)
				return []interface{}{c.Name, int64(len(c.Webhooks)), age(c.CreationTimestamp)}
			},
			hooks: hooks{validate: func(o runtime.Object) field.ErrorList {
				return validateMutatingWebhooks(o.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks)
			}},
		}),
		ar(resource{kind: "ValidatingWebhookConfiguration", plural: "validatingwebhookconfigurations", singular: "validatingwebhookconfiguration",
			categories: []string{"api-extensions"},
			newObj:     func() runtime.Object { return &admissionregistrationv1.ValidatingWebhookConfiguration{} },
			newList:    func() runtime.Object { return &admissionregistrationv1.ValidatingWebhookConfigurationList{} },
			columns:    webhookColumns,
			row: func(o runtime.Object) []interface{} {
				c := o.(*admissionregistrationv1.ValidatingWebhookConfiguration)
				return []interface{}{c.Name, int64(len(c.Webhooks)), age(c.CreationTimestamp)}
			},
			hooks: hooks{validate: func(o runtime.Object) field.ErrorList {
				return validateValidatingWebhooks(o.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks)
			}},
		}),
	}
}

// paramRefString is the binding's ParamRef column: namespace/name, */name when the
// namespace is left to the request, the selector, or <unset>.
func paramRefString(pr *admissionregistrationv1.ParamRef) string {
	switch {
	case pr == nil:
		return "<unset>"
	case pr.Name != "" && pr.Namespace != "":
		return pr.Namespace + "/" + pr.Name
	case pr.Name != "":
		return "*/" + pr.Name
	case pr.Selector != nil:
		return selectorString(pr.Selector)
	}
	return "<unset>"
}

// addAdmissionRegistrationDefaults registers the defaults every Kubernetes API server
// gives these kinds: webhooks and policies fail closed, match equivalent versions of a
// resource, select every namespace and object, and time out after 10s.
func addAdmissionRegistrationDefaults(s *runtime.Scheme) {
	s.AddTypeDefaultingFunc(&admissionregistrationv1.ValidatingWebhookConfiguration{}, func(o interface{}) {
		for i := range o.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks {
			h := &o.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks[i]
			defaultWebhook(&h.FailurePolicy, &h.MatchPolicy, &h.NamespaceSelector, &h.ObjectSelector, &h.TimeoutSeconds, h.Rules, &h.ClientConfig)
		}
	})
	s.AddTypeDefaultingFunc(&admissionregistrationv1.MutatingWebhookConfiguration{}, func(o interface{}) {
		for i := range o.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks {
			h := &o.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks[i]
			defaultWebhook(&h.FailurePolicy, &h.MatchPolicy, &h.NamespaceSelector, &h.ObjectSelector, &h.TimeoutSeconds, h.Rules, &h.ClientConfig)
			if h.ReinvocationPolicy == nil {
				h.ReinvocationPolicy = ptr.To(admissionregistrationv1.NeverReinvocationPolicy)
			}
		}
	})
	s.AddTypeDefaultingFunc(&admissionregistrationv1.ValidatingAdmissionPolicy{}, func(o interface{}) {
		spec := &o.(*admissionregistrationv1.ValidatingAdmissionPolicy).Spec
		if spec.FailurePolicy == nil {
			spec.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
		}
		defaultMatchResources(spec.MatchConstraints)
	})
	s.AddTypeDefaultingFunc(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, func(o interface{}) {
		defaultMatchResources(o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding).Spec.MatchResources)
	})
	s.AddTypeDefaultingFunc(&admissionregistrationv1.MutatingAdmissionPolicy{}, func(o interface{}) {
		spec := &o.(*admissionregistrationv1.MutatingAdmissionPolicy).Spec
		if spec.FailurePolicy == nil {
			spec.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
		}
		defaultMatchResources(spec.MatchConstraints)
	})
	s.AddTypeDefaultingFunc(&admissionregistrationv1.MutatingAdmissionPolicyBinding{}, func(o interface{}) {
		defaultMatchResources(o.(*admissionregistrationv1.MutatingAdmissionPolicyBinding).Spec.MatchResources)
	})
}

func defaultWebhook(failure **admissionregistrationv1.FailurePolicyType, match **admissionregistrationv1.MatchPolicyType,
	nsSel, objSel **metav1.LabelSelector, timeout **int32, rules []admissionregistrationv1.RuleWithOperations,
	cc *admissionregistrationv1.WebhookClientConfig) {
	if *failure == nil {
		*failure = ptr.To(admissionregistrationv1.Fail)
	}
	if *match == nil {
		*match = ptr.To(admissionregistrationv1.Equivalent)
	}
	if *nsSel == nil {
		*nsSel = &metav1.LabelSelector{}
	}
	if *objSel == nil {
		*objSel = &metav1.LabelSelector{}
	}
	if *timeout == nil {
		*timeout = ptr.To[int32](10)
	}
	for i := range rules {
		defaultRuleScope(&rules[i].Rule)
	}
	if cc.Service != nil && cc.Service.Port == nil {
		cc.Service.Port = ptr.To[int32](443)
	}
}

func defaultMatchResources(m *admissionregistrationv1.MatchResources) {
	if m == nil {
		return
	}
	if m.MatchPolicy == nil {
		m.MatchPolicy = ptr.To(admissionregistrationv1.Equivalent)
	}
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	for i := range m.ResourceRules {
		defaultRuleScope(&m.ResourceRules[i].Rule)
	}
	for i := range m.ExcludeResourceRules {
		defaultRuleScope(&m.ExcludeResourceRules[i].Rule)
	}
}

func defaultRuleScope(r *admissionregistrationv1.Rule) {
	if r.Scope == nil {
		r.Scope = ptr.To(admissionregistrationv1.AllScopes)
	}
}
