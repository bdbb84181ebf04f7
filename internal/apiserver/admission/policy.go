package admission

import (
	"fmt"

	"k8s.io/apiserver/pkg/admission"
	mutatingpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	validatingpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
)

// newValidatingAdmissionPolicy is the admission step upstream calls
// ValidatingAdmissionPolicy: every ValidatingAdmissionPolicyBinding whose policy and
// match rules select the request evaluates the policy's CEL validations against it (the
// object, the old object, the request, the parameters, the authorizer), and a failing
// validation denies the request with the validation's message (Deny), adds a warning
// to the response (Warn) or an audit annotation (Audit), as the binding's
// validationActions say. A policy that cannot be evaluated fails the request unless its
// failurePolicy is Ignore. Requests on the policies and bindings themselves are never
// evaluated, so a bad policy cannot lock itself in.
//
// It is k8s.io/apiserver's plugin, reading policies, bindings, namespaces and parameter
// objects through the loopback informers; it waits for them to sync before it answers.
func newValidatingAdmissionPolicy(d Deps) (admission.ValidationInterface, error) {
	p, err := validatingpolicy.NewPlugin(nil)
	if err != nil {
		return nil, fmt.Errorf("admission: %s: %w", validatingpolicy.PluginName, err)
	}
	if err := initialize(d, p); err != nil {
		return nil, fmt.Errorf("admission: %s: %w", validatingpolicy.PluginName, err)
	}
	return p, nil
}

// newMutatingAdmissionPolicy is the admission step upstream calls
// MutatingAdmissionPolicy: every MutatingAdmissionPolicyBinding whose policy and match
// rules select a create, update or connect request applies the policy's CEL mutations
// to the object, as apply configurations (server-side apply's merge) or JSON patches,
// before the mutating webhooks run; with reinvocationPolicy IfNeeded it runs again
// after a webhook changed the object. A mutation that cannot be evaluated fails the
// request unless the policy's failurePolicy is Ignore.
//
// It is k8s.io/apiserver's plugin, reading policies, bindings, namespaces and parameter
// objects through the loopback informers, and the objects' schemas from this server's
// /openapi/v3.
func newMutatingAdmissionPolicy(d Deps) (admission.MutationInterface, error) {
	p, err := mutatingpolicy.NewPlugin(nil)
	if err != nil {
		return nil, fmt.Errorf("admission: %s: %w", mutatingpolicy.PluginName, err)
	}
	if err := initialize(d, p); err != nil {
		return nil, fmt.Errorf("admission: %s: %w", mutatingpolicy.PluginName, err)
	}
	return p, nil
}
