package apiserver

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// errFields is the "type field" list of errs, for comparing with a table's want.
func errFields(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Field)
	}
	return out
}

func sameFields(t *testing.T, name string, got field.ErrorList, want []string) {
	t.Helper()
	g := errFields(got)
	if len(g) != len(want) {
		t.Errorf("%s: got %v, want %v", name, g, want)
		return
	}
	for i := range g {
		if g[i] != want[i] {
			t.Errorf("%s: got %v, want %v", name, g, want)
			return
		}
	}
}

func TestValidateStandardFinalizers(t *testing.T) {
	for _, tc := range []struct {
		finalizers []string
		want       []string
	}{
		{[]string{"kubernetes", "orphan", "foregroundDeletion", "example.com/x"}, nil},
		{[]string{"example.com/x", "foo"}, []string{"FieldValueInvalid metadata.finalizers[1]"}},
	} {
		sameFields(t, tc.finalizers[len(tc.finalizers)-1], validateStandardFinalizers(tc.finalizers, field.NewPath("metadata", "finalizers")), tc.want)
	}
}

func TestValidatePolicyRulesAndBindings(t *testing.T) {
	sameFields(t, "rule without verbs", validatePolicyRules([]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}}}, true),
		[]string{"FieldValueRequired rules[0].verbs"})
	sameFields(t, "namespaced non-resource URL", validatePolicyRules([]rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}}, true),
		[]string{"FieldValueInvalid rules[0].nonResourceURLs"})
	sameFields(t, "cluster non-resource URL", validatePolicyRules([]rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}}, false), nil)

	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "r"}
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "default"}
	sameFields(t, "namespaced binding", validateBinding(ref, []rbacv1.Subject{sa}, true), nil)
	sameFields(t, "cluster binding to a Role, account without namespace", validateBinding(ref, []rbacv1.Subject{sa}, false),
		[]string{"FieldValueNotSupported roleRef.kind", "FieldValueRequired subjects[0].namespace"})
	sameFields(t, "user without apiGroup", validateBinding(ref, []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "u"}}, true),
		[]string{"FieldValueNotSupported subjects[0].apiGroup"})
}

func TestValidateDeploymentStrategyAndDeadlines(t *testing.T) {
	base := func() *appsv1.Deployment {
		d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{
			Selector: &metav1LabelSelector, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst,
				Containers: []corev1.Container{{Name: "c", Image: "i"}}}},
		}}
		d.Spec.Template.Labels = map[string]string{"app": "web"}
		return d
	}
	zero := intstr.FromInt32(0)
	for _, tc := range []struct {
		name string
		mut  func(d *appsv1.Deployment)
		want []string
	}{
		{"defaults", func(*appsv1.Deployment) {}, nil},
		{"restart never", func(d *appsv1.Deployment) { d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever },
			[]string{"FieldValueNotSupported spec.template.spec.restartPolicy"}},
		{"surge and unavailable zero", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &zero, MaxUnavailable: &zero}
		}, []string{"FieldValueInvalid spec.strategy.rollingUpdate.maxUnavailable"}},
		{"progress deadline not above minReady", func(d *appsv1.Deployment) {
			d.Spec.MinReadySeconds = 600
		}, []string{"FieldValueInvalid spec.progressDeadlineSeconds"}},
	} {
		d := base()
		defaultObject(d)
		tc.mut(d)
		sameFields(t, tc.name, validateDeployment(d), tc.want)
	}
}

var metav1LabelSelector = metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}

// defaultObject applies the API server's registered defaults to o.
func defaultObject(o runtime.Object) {
	s := runtime.NewScheme()
	addDefaults(s)
	s.Default(o)
}

func TestPodOnlyDefaults(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "c", Image: "i:1",
		Ports:          []corev1.ContainerPort{{ContainerPort: 80}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}},
	}}}}
	defaultObject(pod)
	if !ptr.Deref(pod.Spec.EnableServiceLinks, false) || pod.Spec.DeprecatedServiceAccount != "default" {
		t.Errorf("pod: enableServiceLinks %v, serviceAccount %q", pod.Spec.EnableServiceLinks, pod.Spec.DeprecatedServiceAccount)
	}
	if got := pod.Spec.Containers[0].Ports[0].HostPort; got != 80 {
		t.Errorf("hostNetwork pod: hostPort %d, want 80", got)
	}
	p := pod.Spec.Containers[0].ReadinessProbe
	if p.TimeoutSeconds != 1 || p.PeriodSeconds != 10 || p.SuccessThreshold != 1 || p.FailureThreshold != 3 || p.HTTPGet.Path != "/" || p.HTTPGet.Scheme != corev1.URISchemeHTTP {
		t.Errorf("probe defaults: %+v", p)
	}

	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: *pod.Spec.DeepCopy()}}}
	d.Spec.Template.Spec.EnableServiceLinks = nil
	d.Spec.Template.Spec.ServiceAccountName, d.Spec.Template.Spec.DeprecatedServiceAccount = "", ""
	defaultObject(d)
	if d.Spec.Template.Spec.EnableServiceLinks != nil || d.Spec.Template.Spec.DeprecatedServiceAccount != "" {
		t.Errorf("template got pod-only defaults: enableServiceLinks %v, serviceAccount %q",
			d.Spec.Template.Spec.EnableServiceLinks, d.Spec.Template.Spec.DeprecatedServiceAccount)
	}
}

// An Endpoints port without a protocol is TCP, as kube-apiserver defaults it.
func TestEndpointsPortProtocolDefault(t *testing.T) {
	ep := &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Port: 80}, {Port: 53, Protocol: corev1.ProtocolUDP}}}}}
	defaultObject(ep)
	if got := ep.Subsets[0].Ports; got[0].Protocol != corev1.ProtocolTCP || got[1].Protocol != corev1.ProtocolUDP {
		t.Errorf("ports after defaulting: %+v", got)
	}
}
