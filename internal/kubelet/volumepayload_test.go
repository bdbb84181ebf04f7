package kubelet

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// fakeObjects serves ConfigMaps and Secrets from maps keyed namespace/name, with the
// kubelet's NotFound errors.
type fakeObjects struct {
	cms     map[string]*corev1.ConfigMap
	secrets map[string]*corev1.Secret
}

func (o *fakeObjects) ConfigMap(ns, name string) (*corev1.ConfigMap, error) {
	if cm, ok := o.cms[ns+"/"+name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmap"}, name)
}

func (o *fakeObjects) Secret(ns, name string) (*corev1.Secret, error) {
	if s, ok := o.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secret"}, name)
}

func testObjects() *fakeObjects {
	return &fakeObjects{
		cms: map[string]*corev1.ConfigMap{"ns1/app": {
			Data:       map[string]string{"greeting": "hello", "mode": "fast"},
			BinaryData: map[string][]byte{"blob": {0, 1, 2}}}},
		secrets: map[string]*corev1.Secret{"ns1/creds": {Data: map[string][]byte{"user": []byte("admin"), "password": []byte("s3cret")}}},
	}
}

func configPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "web", UID: "uid-1",
			Labels: map[string]string{"app": "web", "tier": `front "end"`}, Annotations: map[string]string{"note": "x"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}}}}},
	}
}

// files renders a payload as path → "content (mode)" for comparisons.
func files(p map[string]fileProjection) map[string]string {
	out := map[string]string{}
	for k, v := range p {
		out[k] = string(v.data) + " (" + strings.TrimLeft(modeString(v.mode), "0") + ")"
	}
	return out
}

func modeString(m int32) string {
	const digits = "01234567"
	return string([]byte{digits[m>>9&7], digits[m>>6&7], digits[m>>3&7], digits[m&7]})
}

func wantFiles(t *testing.T, what string, got map[string]fileProjection, want map[string]string) {
	t.Helper()
	g := files(got)
	if len(g) != len(want) {
		t.Errorf("%s: files %v, want %v", what, g, want)
		return
	}
	for k, v := range want {
		if g[k] != v {
			t.Errorf("%s: %s = %q, want %q (all: %v)", what, k, g[k], v, g)
		}
	}
}

func TestConfigMapAndSecretPayloads(t *testing.T) {
	pod := configPod()
	in := payloadInput{objects: testObjects()}
	vol := func(src corev1.VolumeSource) *corev1.Volume { return &corev1.Volume{Name: "v", VolumeSource: src} }

	got, err := volumePayload(pod, vol(corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}), in)
	if err != nil {
		t.Fatal(err)
	}
	wantFiles(t, "all keys", got, map[string]string{"greeting": "hello (644)", "mode": "fast (644)", "blob": "\x00\x01\x02 (644)"})

	got, err = volumePayload(pod, vol(corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, DefaultMode: ptr.To[int32](0o440),
		Items: []corev1.KeyToPath{{Key: "greeting", Path: "etc/greeting.txt"}, {Key: "mode", Path: "mode", Mode: ptr.To[int32](0o600)}}}}), in)
	if err != nil {
		t.Fatal(err)
	}
	wantFiles(t, "items", got, map[string]string{"etc/greeting.txt": "hello (440)", "mode": "fast (600)"})

	_, err = volumePayload(pod, vol(corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Items: []corev1.KeyToPath{{Key: "nope", Path: "x"}}}}), in)
	if err == nil || err.Error() != "configmap references non-existent config key: nope" {
		t.Errorf("missing key: %v", err)
	}
	got, err = volumePayload(pod, vol(corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{Optional: ptr.To(true),
		LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Items: []corev1.KeyToPath{{Key: "nope", Path: "x"}, {Key: "mode", Path: "m"}}}}), in)
	if err != nil {
		t.Fatal(err)
	}
	wantFiles(t, "optional missing key", got, map[string]string{"m": "fast (644)"})

	_, err = volumePayload(pod, vol(corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}}}), in)
	if err == nil || err.Error() != `configmap "gone" not found` {
		t.Errorf("missing configmap: %v", err)
	}
	got, err = volumePayload(pod, vol(corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{Optional: ptr.To(true),
		LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}}}), in)
	if err != nil || len(got) != 0 {
		t.Errorf("optional missing configmap: %v %v, want an empty volume", got, err)
	}

	got, err = volumePayload(pod, vol(corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds", DefaultMode: ptr.To[int32](0o400)}}), in)
	if err != nil {
		t.Fatal(err)
	}
	wantFiles(t, "secret", got, map[string]string{"user": "admin (400)", "password": "s3cret (400)"})
	_, err = volumePayload(pod, vol(corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds",
		Items: []corev1.KeyToPath{{Key: "token", Path: "t"}}}}), in)
	if err == nil || err.Error() != "references non-existent secret key: token" {
		t.Errorf("missing secret key: %v", err)
	}
	_, err = volumePayload(pod, vol(corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "gone"}}), in)
	if err == nil || err.Error() != `secret "gone" not found` {
		t.Errorf("missing secret: %v", err)
	}
}

func TestDownwardAPIPayload(t *testing.T) {
	pod := configPod()
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")}
	field := func(path, fp string) corev1.DownwardAPIVolumeFile {
		return corev1.DownwardAPIVolumeFile{Path: path, FieldRef: &corev1.ObjectFieldSelector{FieldPath: fp}}
	}
	res := func(path, r, divisor string) corev1.DownwardAPIVolumeFile {
		f := corev1.DownwardAPIVolumeFile{Path: path, ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "main", Resource: r}}
		if divisor != "" {
			f.ResourceFieldRef.Divisor = resource.MustParse(divisor)
		}
		return f
	}
	items := []corev1.DownwardAPIVolumeFile{
		field("name", "metadata.name"), field("namespace", "metadata.namespace"), field("uid", "metadata.uid"),
		field("labels", "metadata.labels"), field("annotations", "metadata.annotations"),
		field("app", "metadata.labels['app']"), field("note", "metadata.annotations['note']"),
		res("cpu_request", "requests.cpu", "1m"), res("cpu_limit", "limits.cpu", ""),
		res("mem_limit", "limits.memory", "1Mi"), res("mem_request", "requests.memory", ""),
	}
	items[0].Mode = ptr.To[int32](0o400)
	got, err := volumePayload(pod, &corev1.Volume{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: items}}},
		payloadInput{allocatable: alloc})
	if err != nil {
		t.Fatal(err)
	}
	wantFiles(t, "downward API", got, map[string]string{
		"name": "web (400)", "namespace": "ns1 (644)", "uid": "uid-1 (644)",
		"labels": "app=\"web\"\ntier=\"front \\\"end\\\"\" (644)", "annotations": "note=\"x\" (644)",
		"app": "web (644)", "note": "x (644)",
		"cpu_request": "250 (644)", "cpu_limit": "2 (644)", // no cpu limit: the node's allocatable
		"mem_limit": "128 (644)", "mem_request": "67108864 (644)",
	})

	_, err = downwardAPIPayload(pod, []corev1.DownwardAPIVolumeFile{field("x", "spec.nodeName"),
		{Path: "y", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "other", Resource: "limits.cpu"}}}, 0o644, alloc)
	if err == nil || !strings.Contains(err.Error(), "unsupported fieldPath: spec.nodeName") || !strings.Contains(err.Error(), "container other not found") {
		t.Errorf("bad items: %v", err)
	}
}

func TestProjectedPayload(t *testing.T) {
	pod := configPod()
	in := payloadInput{objects: testObjects(), token: func(*corev1.Pod, *corev1.ServiceAccountTokenProjection) (string, error) { return "jwt", nil }}
	src := &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o444), Sources: []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "app"},
			Items: []corev1.KeyToPath{{Key: "greeting", Path: "greeting"}}}},
		{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"},
			Items: []corev1.KeyToPath{{Key: "user", Path: "user", Mode: ptr.To[int32](0o400)}}}},
		{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}, Optional: ptr.To(true)}},
	}}
	got, err := volumePayload(pod, &corev1.Volume{Name: "all", VolumeSource: corev1.VolumeSource{Projected: src}}, in)
	if err != nil {
		t.Fatal(err)
	}
	wantFiles(t, "projected", got, map[string]string{"token": "jwt (444)", "greeting": "hello (444)", "user": "admin (400)", "namespace": "ns1 (444)"})

	src.Sources = append(src.Sources,
		corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}}},
		corev1.VolumeProjection{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}}})
	_, err = projectedPayload(pod, src, in)
	if err == nil || err.Error() != `[configmap "gone" not found, secret "gone" not found]` {
		t.Errorf("missing sources: %v", err)
	}
}
