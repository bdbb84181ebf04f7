package kuberuntime

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "alpha", "B": "$(A)", "EMPTY": ""}
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "alpha"},
		{"x-$(A)-y", "x-alpha-y"},
		{"$(B)", "$(A)"}, // values are not expanded again
		{"$(MISSING)", "$(MISSING)"},
		{"$$(A)", "$(A)"},
		{"$$$(A)", "$alpha"},
		{"$(A", "$(A"},
		{"$A", "$A"},
		{"cost $", "cost $"},
		{"$(EMPTY)x", "x"},
		{"$()", "$()"},
	}
	for _, tt := range tests {
		if got := expand(tt.in, mappingOf(vars)); got != tt.want {
			t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// fakeObjects serves ConfigMaps and Secrets from maps.
type fakeObjects struct {
	cms     map[string]*corev1.ConfigMap
	secrets map[string]*corev1.Secret
	service map[string]string
}

func (o *fakeObjects) ConfigMap(ns, name string) (*corev1.ConfigMap, error) {
	if cm, ok := o.cms[ns+"/"+name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (o *fakeObjects) Secret(ns, name string) (*corev1.Secret, error) {
	if s, ok := o.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func (o *fakeObjects) ServiceEnv(*corev1.Pod) (map[string]string, error) { return o.service, nil }

func TestContainerEnv(t *testing.T) {
	yes := true
	pod := testPod(corev1.RestartPolicyAlways, nil, "app")
	pod.Labels = map[string]string{"app": "web"}
	pod.Annotations = map[string]string{"team": "storage"}
	pod.Spec.ServiceAccountName = "sa"
	c := &pod.Spec.Containers[0]
	c.Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
	}
	field := func(p string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: p}}
	}
	res := func(r, div string) *corev1.EnvVarSource {
		s := &corev1.ResourceFieldSelector{Resource: r}
		if div != "" {
			s.Divisor = resource.MustParse(div)
		}
		return &corev1.EnvVarSource{ResourceFieldRef: s}
	}
	c.EnvFrom = []corev1.EnvFromSource{
		{Prefix: "CM_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}},
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}, Optional: &yes}},
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}},
	}
	c.Env = []corev1.EnvVar{
		{Name: "NAME", ValueFrom: field("metadata.name")},
		{Name: "NS", ValueFrom: field("metadata.namespace")},
		{Name: "UID", ValueFrom: field("metadata.uid")},
		{Name: "NODE", ValueFrom: field("spec.nodeName")},
		{Name: "SA", ValueFrom: field("spec.serviceAccountName")},
		{Name: "POD_IP", ValueFrom: field("status.podIP")},
		{Name: "HOST_IP", ValueFrom: field("status.hostIP")},
		{Name: "LABEL", ValueFrom: field("metadata.labels['app']")},
		{Name: "ANN", ValueFrom: field("metadata.annotations['team']")},
		{Name: "CPU_REQ_M", ValueFrom: res("requests.cpu", "1m")},
		{Name: "CPU_REQ", ValueFrom: res("requests.cpu", "")},
		{Name: "CPU_LIM", ValueFrom: res("limits.cpu", "")},
		{Name: "MEM_LIM_MI", ValueFrom: res("limits.memory", "1Mi")},
		{Name: "KEY", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "mode"}}},
		{Name: "PASS", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "password"}}},
		{Name: "OPT", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "nope", Optional: &yes}}},
		{Name: "GREETING", Value: "hello $(NAME) in $(NS) at $(KUBERNETES_SERVICE_HOST), $(UNSET) $$(NAME)"},
		{Name: "CM_mode", Value: "overridden"},
	}
	objs := &fakeObjects{
		cms:     map[string]*corev1.ConfigMap{"default/cfg": {Data: map[string]string{"mode": "fast", "data-1": "x"}}},
		secrets: map[string]*corev1.Secret{"default/creds": {Data: map[string][]byte{"password": []byte("s3cret"), "1st": []byte("one")}}},
		service: map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1", "NAME": "not-this"},
	}
	env, err := containerEnv(pod, c, envInput{podIP: "10.1.0.5", allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")}, objects: objs})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range env {
		got = append(got, e.name+"="+e.value)
	}
	want := []string{
		"CM_data-1=x", "CM_mode=overridden", "1st=one", "password=s3cret", "NAME=web", "NS=default", "UID=uid-1", "NODE=node-1", "SA=sa", "POD_IP=10.1.0.5",
		"LABEL=web", "ANN=storage", "CPU_REQ_M=250", "CPU_REQ=1", "CPU_LIM=4", "MEM_LIM_MI=128", "KEY=fast", "PASS=s3cret",
		"GREETING=hello web in default at 10.0.0.1, $(UNSET) $(NAME)", "KUBERNETES_SERVICE_HOST=10.0.0.1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("env:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Host-network pods get the node's address as theirs.
	hn := pod.DeepCopy()
	hn.Spec.HostNetwork = true
	hc := &hn.Spec.Containers[0]
	hc.EnvFrom, hc.Env = nil, []corev1.EnvVar{{Name: "POD_IP", ValueFrom: field("status.podIP")}, {Name: "HOST_IP", ValueFrom: field("status.hostIP")}}
	env, err = containerEnv(hn, hc, envInput{nodeIP: "192.168.1.10", podIP: ""})
	if err != nil || fmt.Sprint(env) != "[{POD_IP 192.168.1.10} {HOST_IP 192.168.1.10}]" {
		t.Errorf("host network env = %v, %v", env, err)
	}
}

func TestContainerEnvErrors(t *testing.T) {
	objs := &fakeObjects{cms: map[string]*corev1.ConfigMap{"default/cfg": {Data: map[string]string{"a": "1"}}}}
	tests := []struct {
		name    string
		env     corev1.EnvVar
		objects Objects
		want    string
	}{
		{"missing configmap", corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Key: "a"}}}, objs, `configmaps "nope" not found`},
		{"missing key", corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "b"}}}, objs, "couldn't find key b in ConfigMap default/cfg"},
		{"no object source", corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}, nil, `secret "s": no source of Secrets on this node`},
		{"bad field", corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.foo"}}},
			objs, "unsupported fieldPath: spec.foo"},
	}
	for _, tt := range tests {
		pod := testPod(corev1.RestartPolicyAlways, nil, "app")
		pod.Spec.Containers[0].Env = []corev1.EnvVar{tt.env}
		_, err := containerEnv(pod, &pod.Spec.Containers[0], envInput{objects: tt.objects})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
}
