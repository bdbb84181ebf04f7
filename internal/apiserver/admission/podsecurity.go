package admission

import (
	"context"
	"errors"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	psadmission "k8s.io/pod-security-admission/admission"
	psload "k8s.io/pod-security-admission/admission/api/load"
	psapi "k8s.io/pod-security-admission/api"
	psmetrics "k8s.io/pod-security-admission/metrics"
	"k8s.io/pod-security-admission/policy"
)

// podSecurity is the admission step upstream calls PodSecurity: the Pod Security
// Standards (privileged, baseline, restricted) a namespace asks for with its labels
// pod-security.kubernetes.io/enforce, audit and warn (each with a -version label,
// latest by default). A pod violating the enforce level is refused; violations of the
// warn level reach the client as warnings and of the audit level the audit log. Pod
// controllers (Deployments, ReplicaSets, StatefulSets, DaemonSets) are only warned
// and audited: their pods are what is enforced. A namespace whose enforce label is
// tightened is told, as warnings, which of its pods would now be refused. Without
// labels every level is privileged, and nothing is exempt.
type podSecurity struct {
	*admission.Handler
	delegate *psadmission.Admission
}

var _ admission.ValidationInterface = (*podSecurity)(nil)

func newPodSecurity(factory informers.SharedInformerFactory, client kubernetes.Interface) (*podSecurity, error) {
	config, err := psload.LoadFromData(nil)
	if err != nil {
		return nil, fmt.Errorf("admission: PodSecurity: default configuration: %w", err)
	}
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		return nil, fmt.Errorf("admission: PodSecurity: %w", err)
	}
	namespaces := factory.Core().V1().Namespaces()
	p := &podSecurity{
		Handler: admission.NewHandler(admission.Create, admission.Update),
		delegate: &psadmission.Admission{
			Configuration:    config,
			Evaluator:        evaluator,
			Metrics:          noPodSecurityMetrics{},
			PodSpecExtractor: psadmission.DefaultPodSpecExtractor{},
			NamespaceGetter:  psadmission.NamespaceGetterFromListerAndClient(namespaces.Lister(), client),
			PodLister:        psadmission.PodListerFromInformer(factory.Core().V1().Pods().Lister()),
		},
	}
	p.SetReadyFunc(namespaces.Informer().HasSynced)
	if err := p.delegate.CompleteConfiguration(); err != nil {
		return nil, fmt.Errorf("admission: PodSecurity: %w", err)
	}
	if err := p.delegate.ValidateConfiguration(); err != nil {
		return nil, fmt.Errorf("admission: PodSecurity: %w", err)
	}
	return p, nil
}

func (p *podSecurity) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	gr := a.GetResource().GroupResource()
	if gr != corev1.Resource("namespaces") && !p.delegate.PodSpecExtractor.HasPodSpec(gr) {
		return nil
	}
	result := p.delegate.Validate(ctx, podSecurityAttributes{a})
	for _, w := range result.Warnings {
		warning.AddWarning(ctx, "", w)
	}
	if len(result.AuditAnnotations) > 0 {
		kv := make([]string, 0, 2*len(result.AuditAnnotations))
		for k, v := range result.AuditAnnotations {
			kv = append(kv, psapi.AuditAnnotationPrefix+k, v)
		}
		audit.AddAuditAnnotations(ctx, kv...)
	}
	if result.Allowed {
		return nil
	}
	return podSecurityError(a, result)
}

// podSecurityError is a refused response as the API's status: forbidden, with the
// message, reason, details and code the evaluation gave.
func podSecurityError(a admission.Attributes, result *admissionv1.AdmissionResponse) error {
	var status *apierrors.StatusError
	if !errors.As(admission.NewForbidden(a, errors.New("Not allowed by PodSecurity")), &status) {
		return admission.NewForbidden(a, errors.New("Not allowed by PodSecurity"))
	}
	if r := result.Result; r != nil {
		if r.Message != "" {
			status.ErrStatus.Message = r.Message
		}
		if r.Reason != "" {
			status.ErrStatus.Reason = r.Reason
		}
		if r.Details != nil {
			status.ErrStatus.Details = r.Details
		}
		if r.Code != 0 {
			status.ErrStatus.Code = r.Code
		}
	}
	return status
}

// podSecurityAttributes are the request's attributes as the Pod Security library reads
// them (the server's objects are already the v1 types it wants).
type podSecurityAttributes struct{ admission.Attributes }

func (a podSecurityAttributes) GetOperation() admissionv1.Operation {
	return admissionv1.Operation(a.Attributes.GetOperation())
}

func (a podSecurityAttributes) GetUserName() string {
	if u := a.GetUserInfo(); u != nil {
		return u.GetName()
	}
	return ""
}

func (a podSecurityAttributes) GetObject() (runtime.Object, error) {
	return a.Attributes.GetObject(), nil
}

func (a podSecurityAttributes) GetOldObject() (runtime.Object, error) {
	return a.Attributes.GetOldObject(), nil
}

// noPodSecurityMetrics records nothing: the server exports no Pod Security metrics.
type noPodSecurityMetrics struct{}

func (noPodSecurityMetrics) RecordEvaluation(psmetrics.Decision, psapi.LevelVersion, psmetrics.Mode, psapi.Attributes) {
}
func (noPodSecurityMetrics) RecordExemption(psapi.Attributes)   {}
func (noPodSecurityMetrics) RecordError(bool, psapi.Attributes) {}
