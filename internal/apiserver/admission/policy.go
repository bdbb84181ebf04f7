package admission

import (
	"fmt"

	"k8s.io/apiserver/pkg/admission"
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
