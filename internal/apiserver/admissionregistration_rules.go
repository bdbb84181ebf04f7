package apiserver

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	validatingpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/utils/ptr"
)

// The values the webhook and policy fields accept.
var (
	failurePolicies      = sets.New(string(admissionregistrationv1.Ignore), string(admissionregistrationv1.Fail))
	matchPolicies        = sets.New(string(admissionregistrationv1.Exact), string(admissionregistrationv1.Equivalent))
	noSideEffectClasses  = sets.New(string(admissionregistrationv1.SideEffectClassNone), string(admissionregistrationv1.SideEffectClassNoneOnDryRun))
	reinvocationPolicies = sets.New(string(admissionregistrationv1.NeverReinvocationPolicy), string(admissionregistrationv1.IfNeededReinvocationPolicy))
	ruleOperations       = sets.New(string(admissionregistrationv1.OperationAll), string(admissionregistrationv1.Create),
		string(admissionregistrationv1.Update), string(admissionregistrationv1.Delete), string(admissionregistrationv1.Connect))
	ruleScopes = sets.New(string(admissionregistrationv1.ClusterScope), string(admissionregistrationv1.NamespacedScope),
		string(admissionregistrationv1.AllScopes))
	validationActions = sets.New(string(admissionregistrationv1.Deny), string(admissionregistrationv1.Warn),
		string(admissionregistrationv1.Audit))
	validationReasons = sets.New(string(metav1.StatusReasonForbidden), string(metav1.StatusReasonInvalid),
		string(metav1.StatusReasonRequestEntityTooLarge))
	// admissionReviewVersions are the AdmissionReview versions the webhook plugins send.
	admissionReviewVersions = []string{"v1", "v1beta1"}
)

// webhookFields are the fields validating and mutating webhooks share.
type webhookFields struct {
	name                    string
	clientConfig            admissionregistrationv1.WebhookClientConfig
	rules                   []admissionregistrationv1.RuleWithOperations
	failurePolicy           *admissionregistrationv1.FailurePolicyType
	matchPolicy             *admissionregistrationv1.MatchPolicyType
	namespaceSelector       *metav1.LabelSelector
	objectSelector          *metav1.LabelSelector
	sideEffects             *admissionregistrationv1.SideEffectClass
	timeoutSeconds          *int32
	admissionReviewVersions []string
	matchConditions         []admissionregistrationv1.MatchCondition
}

func validateValidatingWebhooks(hooks []admissionregistrationv1.ValidatingWebhook) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, h := range hooks {
		p := field.NewPath("webhooks").Index(i)
		errs = append(errs, validateWebhook(webhookFields{h.Name, h.ClientConfig, h.Rules, h.FailurePolicy, h.MatchPolicy,
			h.NamespaceSelector, h.ObjectSelector, h.SideEffects, h.TimeoutSeconds, h.AdmissionReviewVersions, h.MatchConditions}, p)...)
		errs = append(errs, uniqueName(names, h.Name, p.Child("name"))...)
	}
	return errs
}

func validateMutatingWebhooks(hooks []admissionregistrationv1.MutatingWebhook) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, h := range hooks {
		p := field.NewPath("webhooks").Index(i)
		errs = append(errs, validateWebhook(webhookFields{h.Name, h.ClientConfig, h.Rules, h.FailurePolicy, h.MatchPolicy,
			h.NamespaceSelector, h.ObjectSelector, h.SideEffects, h.TimeoutSeconds, h.AdmissionReviewVersions, h.MatchConditions}, p)...)
		if h.ReinvocationPolicy != nil && !reinvocationPolicies.Has(string(*h.ReinvocationPolicy)) {
			errs = append(errs, field.NotSupported(p.Child("reinvocationPolicy"), *h.ReinvocationPolicy, sets.List(reinvocationPolicies)))
		}
		errs = append(errs, uniqueName(names, h.Name, p.Child("name"))...)
	}
	return errs
}

func uniqueName(seen sets.Set[string], name string, p *field.Path) field.ErrorList {
	if name == "" {
		return nil
	}
	if seen.Has(name) {
		return field.ErrorList{field.Duplicate(p, name)}
	}
	seen.Insert(name)
	return nil
}

// validateWebhook: a fully qualified name, valid rules, known policies, no side effects
// (or none on dry run), a timeout of 1-30s, valid selectors, exactly one of an https url
// and a service reference, a known AdmissionReview version and compiling match conditions.
func validateWebhook(h webhookFields, p *field.Path) field.ErrorList {
	errs := utilvalidation.IsFullyQualifiedName(p.Child("name"), h.name)
	for i := range h.rules {
		errs = append(errs, validateRuleWithOperations(&h.rules[i], p.Child("rules").Index(i))...)
	}
	if h.failurePolicy != nil && !failurePolicies.Has(string(*h.failurePolicy)) {
		errs = append(errs, field.NotSupported(p.Child("failurePolicy"), *h.failurePolicy, sets.List(failurePolicies)))
	}
	if h.matchPolicy != nil && !matchPolicies.Has(string(*h.matchPolicy)) {
		errs = append(errs, field.NotSupported(p.Child("matchPolicy"), *h.matchPolicy, sets.List(matchPolicies)))
	}
	switch {
	case h.sideEffects == nil:
		errs = append(errs, field.Required(p.Child("sideEffects"), "must specify one of "+strings.Join(sets.List(noSideEffectClasses), ", ")))
	case !noSideEffectClasses.Has(string(*h.sideEffects)):
		errs = append(errs, field.NotSupported(p.Child("sideEffects"), *h.sideEffects, sets.List(noSideEffectClasses)))
	}
	if h.timeoutSeconds != nil && (*h.timeoutSeconds > 30 || *h.timeoutSeconds < 1) {
		errs = append(errs, field.Invalid(p.Child("timeoutSeconds"), *h.timeoutSeconds, "the timeout value must be between 1 and 30 seconds"))
	}
	if h.namespaceSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(h.namespaceSelector, metav1validation.LabelSelectorValidationOptions{}, p.Child("namespaceSelector"))...)
	}
	if h.objectSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(h.objectSelector, metav1validation.LabelSelectorValidationOptions{}, p.Child("objectSelector"))...)
	}
	cc, ccPath := h.clientConfig, p.Child("clientConfig")
	switch {
	case (cc.URL == nil) == (cc.Service == nil):
		errs = append(errs, field.Required(ccPath, "exactly one of url or service is required"))
	case cc.URL != nil:
		errs = append(errs, webhook.ValidateWebhookURL(ccPath.Child("url"), *cc.URL, true)...)
	default:
		errs = append(errs, webhook.ValidateWebhookService(ccPath.Child("service"), cc.Service.Namespace, cc.Service.Name,
			cc.Service.Path, ptr.Deref(cc.Service.Port, 443))...)
	}
	errs = append(errs, validateAdmissionReviewVersions(h.admissionReviewVersions, p.Child("admissionReviewVersions"))...)
	errs = append(errs, validateMatchConditions(h.matchConditions, false, p.Child("matchConditions"))...)
	return errs
}

func validateAdmissionReviewVersions(versions []string, p *field.Path) field.ErrorList {
	if len(versions) == 0 {
		return field.ErrorList{field.Required(p, "must specify one of "+strings.Join(admissionReviewVersions, ", "))}
	}
	var errs field.ErrorList
	seen := sets.New[string]()
	known := false
	for i, v := range versions {
		if seen.Has(v) {
			errs = append(errs, field.Invalid(p.Index(i), v, "duplicate version"))
			continue
		}
		seen.Insert(v)
		for _, msg := range utilvalidation.IsDNS1035Label(v) {
			errs = append(errs, field.Invalid(p.Index(i), v, msg))
		}
		known = known || sets.New(admissionReviewVersions...).Has(v)
	}
	if !known {
		errs = append(errs, field.Invalid(p, versions, "must include at least one of "+strings.Join(admissionReviewVersions, ", ")))
	}
	return errs
}

func validateRuleWithOperations(r *admissionregistrationv1.RuleWithOperations, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.Operations) == 0 {
		errs = append(errs, field.Required(p.Child("operations"), ""))
	}
	if len(r.Operations) > 1 && sets.New(r.Operations...).Has(admissionregistrationv1.OperationAll) {
		errs = append(errs, field.Invalid(p.Child("operations"), r.Operations, "if '*' is present, must not specify other operations"))
	}
	for i, op := range r.Operations {
		if !ruleOperations.Has(string(op)) {
			errs = append(errs, field.NotSupported(p.Child("operations").Index(i), op, sets.List(ruleOperations)))
		}
	}
	rule := r.Rule
	if len(rule.APIGroups) == 0 {
		errs = append(errs, field.Required(p.Child("apiGroups"), ""))
	}
	if len(rule.APIGroups) > 1 && sets.New(rule.APIGroups...).Has("*") {
		errs = append(errs, field.Invalid(p.Child("apiGroups"), rule.APIGroups, "if '*' is present, must not specify other API groups"))
	}
	if len(rule.APIVersions) == 0 {
		errs = append(errs, field.Required(p.Child("apiVersions"), ""))
	}
	if len(rule.APIVersions) > 1 && sets.New(rule.APIVersions...).Has("*") {
		errs = append(errs, field.Invalid(p.Child("apiVersions"), rule.APIVersions, "if '*' is present, must not specify other API versions"))
	}
	for i, v := range rule.APIVersions {
		if v == "" {
			errs = append(errs, field.Required(p.Child("apiVersions").Index(i), ""))
		}
	}
	errs = append(errs, validateRuleResources(rule.Resources, p.Child("resources"))...)
	if rule.Scope != nil && !ruleScopes.Has(string(*rule.Scope)) {
		errs = append(errs, field.NotSupported(p.Child("scope"), *rule.Scope, sets.List(ruleScopes)))
	}
	return errs
}

// validateRuleResources: resources and resource/subresource pairs, where a wildcard
// covers what it would make redundant.
func validateRuleResources(resources []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(resources) == 0 {
		errs = append(errs, field.Required(p, ""))
	}
	wildSub, wildRes := sets.New[string](), sets.New[string]()
	doubleWild, singleWild, plain := false, false, false
	for i, rs := range resources {
		if rs == "" {
			errs = append(errs, field.Required(p.Index(i), ""))
			continue
		}
		doubleWild = doubleWild || rs == "*/*"
		singleWild = singleWild || rs == "*"
		res, sub, ok := strings.Cut(rs, "/")
		if !ok {
			plain = plain || rs != "*"
			continue
		}
		if wildSub.Has(res) {
			errs = append(errs, field.Invalid(p.Index(i), rs, fmt.Sprintf("if '%s/*' is present, must not specify %s", res, rs)))
		}
		if wildRes.Has(sub) {
			errs = append(errs, field.Invalid(p.Index(i), rs, fmt.Sprintf("if '*/%s' is present, must not specify %s", sub, rs)))
		}
		if sub == "*" {
			wildSub.Insert(res)
		}
		if res == "*" {
			wildRes.Insert(sub)
		}
	}
	if len(resources) > 1 && doubleWild {
		errs = append(errs, field.Invalid(p, resources, "if '*/*' is present, must not specify other resources"))
	}
	if singleWild && plain {
		errs = append(errs, field.Invalid(p, resources, "if '*' is present, must not specify other resources without subresources"))
	}
	return errs
}

// validateValidatingAdmissionPolicySpec: a known failure policy, match constraints with
// at least one resource rule, compiling match conditions, variables, validations and
// audit annotations, and at least one validation or audit annotation.
func validateValidatingAdmissionPolicySpec(pol *admissionregistrationv1.ValidatingAdmissionPolicy) field.ErrorList {
	spec, p := &pol.Spec, field.NewPath("spec")
	var errs field.ErrorList
	if spec.FailurePolicy == nil {
		errs = append(errs, field.Required(p.Child("failurePolicy"), ""))
	} else if !failurePolicies.Has(string(*spec.FailurePolicy)) {
		errs = append(errs, field.NotSupported(p.Child("failurePolicy"), *spec.FailurePolicy, sets.List(failurePolicies)))
	}
	hasParams := spec.ParamKind != nil
	if hasParams {
		errs = append(errs, validateParamKind(spec.ParamKind, p.Child("paramKind"))...)
	}
	if spec.MatchConstraints == nil {
		errs = append(errs, field.Required(p.Child("matchConstraints"), ""))
	} else {
		errs = append(errs, validateMatchResources(spec.MatchConstraints, p.Child("matchConstraints"))...)
		if len(spec.MatchConstraints.ResourceRules) == 0 {
			errs = append(errs, field.Required(p.Child("matchConstraints", "resourceRules"), ""))
		}
	}
	errs = append(errs, validateMatchConditions(spec.MatchConditions, hasParams, p.Child("matchConditions"))...)

	// Variables are compiled into the environment the later expressions see.
	compiler := policyCompiler()
	if len(spec.Variables) > 0 {
		composited, err := plugincel.NewCompositedCompiler(celEnv())
		if err != nil {
			return append(errs, field.InternalError(p.Child("variables"), err))
		}
		for i, v := range spec.Variables {
			vp := p.Child("variables").Index(i)
			switch {
			case strings.TrimSpace(v.Name) == "":
				errs = append(errs, field.Required(vp.Child("name"), "name is not specified"))
			case !isCELIdentifier(v.Name):
				errs = append(errs, field.Invalid(vp.Child("name"), v.Name, "name is not a valid CEL identifier"))
			}
			if strings.TrimSpace(v.Expression) == "" {
				errs = append(errs, field.Required(vp.Child("expression"), "expression is not specified"))
				continue
			}
			res := composited.CompileAndStoreVariable(&validatingpolicy.Variable{Name: v.Name, Expression: v.Expression},
				plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}, environment.NewExpressions)
			if res.Error != nil {
				errs = append(errs, celFieldError(vp.Child("expression"), v.Expression, res.Error))
			}
		}
		compiler = composited
	}

	if len(spec.Validations) == 0 && len(spec.AuditAnnotations) == 0 {
		const msg = "validations or auditAnnotations must contain at least one item"
		return append(errs, field.Required(p.Child("validations"), msg), field.Required(p.Child("auditAnnotations"), msg))
	}
	for i := range spec.Validations {
		errs = append(errs, validateValidation(compiler, &spec.Validations[i], hasParams, p.Child("validations").Index(i))...)
	}
	if len(spec.AuditAnnotations) > 20 {
		errs = append(errs, field.Invalid(p.Child("auditAnnotations"), spec.AuditAnnotations, "must not have more than 20 auditAnnotations"))
	}
	keys := sets.New[string]()
	for i, a := range spec.AuditAnnotations {
		ap := p.Child("auditAnnotations").Index(i)
		if pol.Name != "" {
			errs = append(errs, validateQualifiedName(pol.Name+"/"+a.Key, ap.Child("key"))...)
		} else {
			errs = append(errs, field.Invalid(ap.Child("key"), a.Key, "requires metadata.name be non-empty"))
		}
		if keys.Has(a.Key) {
			errs = append(errs, field.Duplicate(ap.Child("key"), a.Key))
		}
		keys.Insert(a.Key)
		expr := strings.TrimSpace(a.ValueExpression)
		switch {
		case expr == "":
			errs = append(errs, field.Required(ap.Child("valueExpression"), "valueExpression is not specified"))
		case len(expr) > 5*1024:
			errs = append(errs, field.Required(ap.Child("valueExpression"), fmt.Sprintf("must not exceed %d bytes in length", 5*1024)))
		default:
			res := compiler.CompileCELExpression(&validatingpolicy.AuditAnnotationCondition{ValueExpression: expr},
				plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}, environment.NewExpressions)
			if res.Error != nil {
				errs = append(errs, celFieldError(ap.Child("valueExpression"), a.ValueExpression, res.Error))
			}
		}
	}
	return errs
}

var newlines = regexp.MustCompile(`[\n\r]+`)

// validateValidation: an expression that compiles to a bool, a message expression that
// compiles to a string, a one-line message and a known reason.
func validateValidation(compiler plugincel.Compiler, v *admissionregistrationv1.Validation, hasParams bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if strings.TrimSpace(v.Expression) == "" {
		errs = append(errs, field.Required(p.Child("expression"), "expression is not specified"))
	} else {
		res := compiler.CompileCELExpression(&validatingpolicy.ValidationCondition{Expression: v.Expression},
			plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}, environment.NewExpressions)
		if res.Error != nil {
			errs = append(errs, celFieldError(p.Child("expression"), v.Expression, res.Error))
		}
	}
	msgExpr := strings.TrimSpace(v.MessageExpression)
	switch {
	case v.MessageExpression != "" && msgExpr == "":
		errs = append(errs, field.Invalid(p.Child("messageExpression"), v.MessageExpression, "must be non-empty if specified"))
	case msgExpr != "":
		res := compiler.CompileCELExpression(&validatingpolicy.MessageExpressionCondition{MessageExpression: v.MessageExpression},
			plugincel.OptionalVariableDeclarations{HasParams: hasParams}, environment.NewExpressions)
		if res.Error != nil {
			errs = append(errs, celFieldError(p.Child("messageExpression"), v.MessageExpression, res.Error))
		}
	}
	msg := strings.TrimSpace(v.Message)
	switch {
	case v.Message != "" && msg == "":
		errs = append(errs, field.Invalid(p.Child("message"), v.Message, "message must be non-empty if specified"))
	case newlines.MatchString(msg):
		errs = append(errs, field.Invalid(p.Child("message"), v.Message, "message must not contain line breaks"))
	}
	if v.Reason != nil && !validationReasons.Has(string(*v.Reason)) {
		errs = append(errs, field.NotSupported(p.Child("reason"), *v.Reason, sets.List(validationReasons)))
	}
	return errs
}

func validateParamKind(pk *admissionregistrationv1.ParamKind, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if pk.APIVersion == "" {
		errs = append(errs, field.Required(p.Child("apiVersion"), ""))
	} else {
		group, version, _ := strings.Cut(pk.APIVersion, "/")
		if !strings.Contains(pk.APIVersion, "/") {
			group, version = "", pk.APIVersion
		}
		switch {
		case strings.Count(pk.APIVersion, "/") > 1:
			errs = append(errs, field.Invalid(p.Child("apiVersion"), pk.APIVersion, "unexpected GroupVersion string: "+pk.APIVersion))
		case version == "":
			errs = append(errs, field.Invalid(p.Child("apiVersion"), pk.APIVersion, "version must be specified"))
		default:
			if group != "" {
				if msgs := utilvalidation.IsDNS1123Subdomain(group); len(msgs) > 0 {
					errs = append(errs, field.Invalid(p.Child("apiVersion"), group, strings.Join(msgs, ",")))
				}
			}
			if msgs := utilvalidation.IsDNS1035Label(version); len(msgs) > 0 {
				errs = append(errs, field.Invalid(p.Child("apiVersion"), version, strings.Join(msgs, ",")))
			}
		}
	}
	if pk.Kind == "" {
		errs = append(errs, field.Required(p.Child("kind"), ""))
	} else if msgs := utilvalidation.IsDNS1035Label(strings.ToLower(pk.Kind)); len(msgs) > 0 {
		errs = append(errs, field.Invalid(p.Child("kind"), pk.Kind, "may have mixed case, but should otherwise match: "+strings.Join(msgs, ",")))
	}
	return errs
}

func validateMatchResources(m *admissionregistrationv1.MatchResources, p *field.Path) field.ErrorList {
	if m == nil {
		return nil
	}
	var errs field.ErrorList
	if m.MatchPolicy == nil {
		errs = append(errs, field.Required(p.Child("matchPolicy"), ""))
	} else if !matchPolicies.Has(string(*m.MatchPolicy)) {
		errs = append(errs, field.NotSupported(p.Child("matchPolicy"), *m.MatchPolicy, sets.List(matchPolicies)))
	}
	for _, sel := range []struct {
		name string
		sel  *metav1.LabelSelector
	}{{"namespaceSelector", m.NamespaceSelector}, {"objectSelector", m.ObjectSelector}} {
		if sel.sel == nil {
			errs = append(errs, field.Required(p.Child(sel.name), ""))
		} else {
			errs = append(errs, metav1validation.ValidateLabelSelector(sel.sel, metav1validation.LabelSelectorValidationOptions{}, p.Child(sel.name))...)
		}
	}
	for _, rules := range []struct {
		name  string
		rules []admissionregistrationv1.NamedRuleWithOperations
	}{{"resourceRules", m.ResourceRules}, {"excludeResourceRules", m.ExcludeResourceRules}} {
		for i := range rules.rules {
			rp := p.Child(rules.name).Index(i)
			names := sets.New[string]()
			for j, n := range rules.rules[i].ResourceNames {
				for _, msg := range path.ValidatePathSegmentName(n, false) {
					errs = append(errs, field.Invalid(rp.Child("resourceNames").Index(j), n, msg))
				}
				errs = append(errs, uniqueName(names, n, rp.Child("resourceNames").Index(j))...)
			}
			errs = append(errs, validateRuleWithOperations(&rules.rules[i].RuleWithOperations, rp)...)
		}
	}
	return errs
}

func validateMatchConditions(conds []admissionregistrationv1.MatchCondition, hasParams bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(conds) > 64 {
		errs = append(errs, field.TooMany(p, len(conds), 64))
	}
	names := sets.New[string]()
	for i, c := range conds {
		cp := p.Index(i)
		if expr := strings.TrimSpace(c.Expression); expr == "" {
			errs = append(errs, field.Required(cp.Child("expression"), ""))
		} else {
			mc := matchconditions.MatchCondition{Expression: expr}
			res := policyCompiler().CompileCELExpression(&mc,
				plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}, environment.NewExpressions)
			if res.Error != nil {
				errs = append(errs, celFieldError(cp.Child("expression"), expr, res.Error))
			}
		}
		if c.Name == "" {
			errs = append(errs, field.Required(cp.Child("name"), ""))
		} else {
			errs = append(errs, validateQualifiedName(c.Name, cp.Child("name"))...)
		}
		errs = append(errs, uniqueName(names, c.Name, cp.Child("name"))...)
	}
	return errs
}

// validateValidatingAdmissionPolicyBindingSpec: a policy name, a valid parameter
// reference, valid match resources and a non-empty set of known validation actions.
func validateValidatingAdmissionPolicyBindingSpec(spec *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.PolicyName == "" {
		errs = append(errs, field.Required(p.Child("policyName"), ""))
	} else {
		for _, msg := range apivalidation.NameIsDNSSubdomain(spec.PolicyName, false) {
			errs = append(errs, field.Invalid(p.Child("policyName"), spec.PolicyName, msg))
		}
	}
	if pr := spec.ParamRef; pr != nil {
		pp := p.Child("paramRef")
		if pr.Name != "" {
			for _, msg := range path.ValidatePathSegmentName(pr.Name, false) {
				errs = append(errs, field.Invalid(pp.Child("name"), pr.Name, msg))
			}
			if pr.Selector != nil {
				errs = append(errs, field.Forbidden(pp.Child("name"), "name and selector are mutually exclusive"))
			}
		}
		if pr.Selector != nil {
			errs = append(errs, metav1validation.ValidateLabelSelector(pr.Selector, metav1validation.LabelSelectorValidationOptions{}, pp.Child("selector"))...)
			if pr.Name != "" {
				errs = append(errs, field.Forbidden(pp.Child("selector"), "name and selector are mutually exclusive"))
			}
		}
		if pr.Name == "" && pr.Selector == nil {
			errs = append(errs, field.Required(pp, "one of name or selector must be specified"))
		}
		switch {
		case pr.ParameterNotFoundAction == nil || *pr.ParameterNotFoundAction == "":
			errs = append(errs, field.Required(pp.Child("parameterNotFoundAction"), ""))
		case *pr.ParameterNotFoundAction != admissionregistrationv1.DenyAction && *pr.ParameterNotFoundAction != admissionregistrationv1.AllowAction:
			errs = append(errs, field.NotSupported(pp.Child("parameterNotFoundAction"), *pr.ParameterNotFoundAction,
				[]string{string(admissionregistrationv1.DenyAction), string(admissionregistrationv1.AllowAction)}))
		}
	}
	errs = append(errs, validateMatchResources(spec.MatchResources, p.Child("matchResources"))...)
	errs = append(errs, validateValidationActions(spec.ValidationActions, p.Child("validationActions"))...)
	return errs
}

func validateValidationActions(actions []admissionregistrationv1.ValidationAction, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, a := range actions {
		if !validationActions.Has(string(a)) {
			errs = append(errs, field.NotSupported(p.Index(i), a, sets.List(validationActions)))
		}
		if seen.Has(string(a)) {
			errs = append(errs, field.Duplicate(p.Index(i), a))
		}
		seen.Insert(string(a))
	}
	if seen.Has(string(admissionregistrationv1.Deny)) && seen.Has(string(admissionregistrationv1.Warn)) {
		errs = append(errs, field.Invalid(p, actions, "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"))
	}
	if len(seen) == 0 {
		errs = append(errs, field.Required(p, "at least one validation action is required"))
	}
	return errs
}

func validateQualifiedName(name string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsQualifiedName(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

// celFieldError turns a CEL compilation error into the field error of the expression.
func celFieldError(p *field.Path, expr string, err *apiservercel.Error) *field.Error {
	switch err.Type {
	case apiservercel.ErrorTypeRequired:
		return field.Required(p, err.Detail)
	case apiservercel.ErrorTypeInvalid:
		return field.Invalid(p, expr, err.Detail)
	}
	return field.InternalError(p, err)
}

// The CEL environment (the admission plugins' base one) and compiler expressions are
// checked with when a policy or webhook is written, built once: building them takes
// tens of milliseconds.
var (
	celEnv = sync.OnceValue(func() *environment.EnvSet {
		return environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
	})
	policyCompiler = sync.OnceValue(func() plugincel.Compiler { return plugincel.NewCompiler(celEnv()) })
)

var (
	celIdentifier = regexp.MustCompile(`^[_a-zA-Z][_a-zA-Z0-9]*$`)
	celReserved   = sets.New("true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function",
		"if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while")
)

func isCELIdentifier(name string) bool {
	return celIdentifier.MatchString(name) && !celReserved.Has(name)
}
