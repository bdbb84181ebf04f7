package podidentitywebhook

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const role = "arn:aws:iam::111122223333:role/ebs-csi"

func sa(annotations map[string]string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "builder", Annotations: annotations}}
}

func TestIdentityOf(t *testing.T) {
	defaults := Settings{Region: "us-east-1", RegionalSTS: true}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		settings    Settings
		want        Identity
		ok          bool
	}{
		{name: "no annotations", ok: false},
		{name: "empty role", annotations: map[string]string{RoleARNAnnotation: ""}, ok: false},
		{name: "role", annotations: map[string]string{RoleARNAnnotation: role}, ok: true,
			want: Identity{RoleARN: role, Audience: "sts.amazonaws.com", RegionalSTS: true, TokenExpiration: 86400}},
		{name: "audience and expiration", ok: true,
			annotations: map[string]string{RoleARNAnnotation: role, AudienceAnnotation: "other", TokenExpirationAnnotation: "7200"},
			want:        Identity{RoleARN: role, Audience: "other", RegionalSTS: true, TokenExpiration: 7200}},
		{name: "expiration raised to the minimum", ok: true,
			annotations: map[string]string{RoleARNAnnotation: role, TokenExpirationAnnotation: "600"},
			want:        Identity{RoleARN: role, Audience: "sts.amazonaws.com", RegionalSTS: true, TokenExpiration: 3600}},
		{name: "expiration not a number", ok: true,
			annotations: map[string]string{RoleARNAnnotation: role, TokenExpirationAnnotation: "a day"},
			want:        Identity{RoleARN: role, Audience: "sts.amazonaws.com", RegionalSTS: true, TokenExpiration: 86400}},
		{name: "global STS", ok: true,
			annotations: map[string]string{RoleARNAnnotation: role, RegionalSTSAnnotation: "false"},
			want:        Identity{RoleARN: role, Audience: "sts.amazonaws.com", RegionalSTS: false, TokenExpiration: 86400}},
		{name: "regional STS by annotation", ok: true, settings: Settings{Audience: "aud", TokenExpiration: 4000},
			annotations: map[string]string{RoleARNAnnotation: role, RegionalSTSAnnotation: "true"},
			want:        Identity{RoleARN: role, Audience: "aud", RegionalSTS: true, TokenExpiration: 4000}},
		{name: "STS annotation not a boolean", ok: true,
			annotations: map[string]string{RoleARNAnnotation: role, RegionalSTSAnnotation: "maybe"},
			want:        Identity{RoleARN: role, Audience: "sts.amazonaws.com", RegionalSTS: true, TokenExpiration: 86400}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := defaults
			if tc.settings != (Settings{}) {
				s = tc.settings
			}
			got, ok := IdentityOf(sa(tc.annotations), s)
			if ok != tc.ok || got != tc.want {
				t.Errorf("IdentityOf = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// apply applies patch to pod: the "add" operations of RFC 6902 on an object member or
// an array index, all the webhook makes (the API server applies the real thing in the
// webhook's test through it).
func apply(t *testing.T, pod *corev1.Pod, patch []PatchOperation) *corev1.Pod {
	t.Helper()
	var doc map[string]any
	roundTrip(t, pod, &doc)
	for _, op := range patch {
		if op.Op != "add" {
			t.Fatalf("operation %q: only add is expected", op.Op)
		}
		var value any
		roundTrip(t, op.Value, &value)
		parts := strings.Split(strings.TrimPrefix(op.Path, "/"), "/")
		parent := doc
		for _, p := range parts[:len(parts)-1] {
			next, ok := parent[p].(map[string]any)
			if !ok {
				if idx, err := strconv.Atoi(parts[len(parts)-1]); err == nil && p == parts[len(parts)-2] {
					arr, _ := parent[p].([]any)
					if idx > len(arr) {
						t.Fatalf("%s: index out of range", op.Path)
					}
					parent[p] = append(arr[:idx], append([]any{value}, arr[idx:]...)...)
					parent = nil
					break
				}
				t.Fatalf("%s: no object at %s", op.Path, p)
			}
			parent = next
		}
		if parent != nil {
			parent[parts[len(parts)-1]] = value
		}
	}
	var got corev1.Pod
	roundTrip(t, doc, &got)
	return &got
}

func roundTrip(t *testing.T, in, out any) {
	t.Helper()
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatal(err)
	}
}

func env(kv ...string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for i := 0; i < len(kv); i += 2 {
		out = append(out, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

var (
	tokenMount = corev1.VolumeMount{Name: "aws-iam-token", ReadOnly: true, MountPath: "/var/run/secrets/eks.amazonaws.com/serviceaccount"}
	fullEnv    = env("AWS_STS_REGIONAL_ENDPOINTS", "regional", "AWS_DEFAULT_REGION", "us-east-1", "AWS_REGION", "us-east-1",
		"AWS_ROLE_ARN", role, "AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/secrets/eks.amazonaws.com/serviceaccount/token")
)

func tokenVolume(audience string, seconds int64) corev1.Volume {
	return corev1.Volume{Name: "aws-iam-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: audience, ExpirationSeconds: &seconds, Path: "token"}}}}}}
}

func TestMutate(t *testing.T) {
	id := Identity{RoleARN: role, Audience: "sts.amazonaws.com", RegionalSTS: true, TokenExpiration: 86400}
	existing := corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	for _, tc := range []struct {
		name        string
		id          Identity
		annotations map[string]string
		nodeOS      string
		spec        corev1.PodSpec
		want        corev1.PodSpec
		changed     bool
	}{
		{
			name:    "containers and init containers, no volumes",
			spec:    corev1.PodSpec{InitContainers: []corev1.Container{{Name: "init"}}, Containers: []corev1.Container{{Name: "app"}, {Name: "side"}}},
			changed: true,
			want: corev1.PodSpec{Volumes: []corev1.Volume{tokenVolume("sts.amazonaws.com", 86400)},
				InitContainers: []corev1.Container{{Name: "init", Env: fullEnv, VolumeMounts: []corev1.VolumeMount{tokenMount}}},
				Containers: []corev1.Container{{Name: "app", Env: fullEnv, VolumeMounts: []corev1.VolumeMount{tokenMount}},
					{Name: "side", Env: fullEnv, VolumeMounts: []corev1.VolumeMount{tokenMount}}}},
		},
		{
			name:    "the token volume goes first",
			spec:    corev1.PodSpec{Volumes: []corev1.Volume{existing}, Containers: []corev1.Container{{Name: "app"}}},
			changed: true,
			want: corev1.PodSpec{Volumes: []corev1.Volume{tokenVolume("sts.amazonaws.com", 86400), existing},
				Containers: []corev1.Container{{Name: "app", Env: fullEnv, VolumeMounts: []corev1.VolumeMount{tokenMount}}}},
		},
		{
			name: "what the container sets stays",
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app",
				Env: env("AWS_REGION", "eu-west-1", "AWS_ROLE_ARN", "mine")}}},
			changed: true,
			want: corev1.PodSpec{Volumes: []corev1.Volume{tokenVolume("sts.amazonaws.com", 86400)},
				Containers: []corev1.Container{{Name: "app",
					Env:          env("AWS_REGION", "eu-west-1", "AWS_ROLE_ARN", "mine", "AWS_STS_REGIONAL_ENDPOINTS", "regional"),
					VolumeMounts: []corev1.VolumeMount{tokenMount}}}},
		},
		{
			name: "a container with all of it set is left alone",
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app",
				Env: env("AWS_DEFAULT_REGION", "eu-west-1", "AWS_WEB_IDENTITY_TOKEN_FILE", "/t", "AWS_STS_REGIONAL_ENDPOINTS", "legacy")}}},
			changed: true, // the volume
			want: corev1.PodSpec{Volumes: []corev1.Volume{tokenVolume("sts.amazonaws.com", 86400)},
				Containers: []corev1.Container{{Name: "app",
					Env: env("AWS_DEFAULT_REGION", "eu-west-1", "AWS_WEB_IDENTITY_TOKEN_FILE", "/t", "AWS_STS_REGIONAL_ENDPOINTS", "legacy")}}},
		},
		{
			name: "already mutated",
			spec: corev1.PodSpec{Volumes: []corev1.Volume{tokenVolume("sts.amazonaws.com", 86400)},
				Containers: []corev1.Container{{Name: "app", Env: fullEnv, VolumeMounts: []corev1.VolumeMount{tokenMount}}}},
			changed: false,
			want: corev1.PodSpec{Volumes: []corev1.Volume{tokenVolume("sts.amazonaws.com", 86400)},
				Containers: []corev1.Container{{Name: "app", Env: fullEnv, VolumeMounts: []corev1.VolumeMount{tokenMount}}}},
		},
		{
			name:        "skip-containers and the pod's expiration",
			annotations: map[string]string{SkipContainersAnnotation: "side,init", TokenExpirationAnnotation: "7200"},
			spec:        corev1.PodSpec{InitContainers: []corev1.Container{{Name: "init"}}, Containers: []corev1.Container{{Name: "app"}, {Name: "side"}}},
			changed:     true,
			want: corev1.PodSpec{Volumes: []corev1.Volume{tokenVolume("sts.amazonaws.com", 7200)},
				InitContainers: []corev1.Container{{Name: "init"}},
				Containers:     []corev1.Container{{Name: "app", Env: fullEnv, VolumeMounts: []corev1.VolumeMount{tokenMount}}, {Name: "side"}}},
		},
		{
			name:    "global STS, another audience",
			id:      Identity{RoleARN: role, Audience: "vault", TokenExpiration: 3600},
			spec:    corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}},
			changed: true,
			want: corev1.PodSpec{Volumes: []corev1.Volume{tokenVolume("vault", 3600)},
				Containers: []corev1.Container{{Name: "app", Env: fullEnv[1:], VolumeMounts: []corev1.VolumeMount{tokenMount}}}},
		},
		{
			name:    "windows path",
			nodeOS:  "windows",
			spec:    corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}},
			changed: true,
			want: corev1.PodSpec{Volumes: []corev1.Volume{tokenVolume("sts.amazonaws.com", 86400)},
				NodeSelector: map[string]string{"kubernetes.io/os": "windows"},
				Containers: []corev1.Container{{Name: "app", VolumeMounts: []corev1.VolumeMount{tokenMount},
					Env: append(append([]corev1.EnvVar(nil), fullEnv[:4]...), corev1.EnvVar{Name: "AWS_WEB_IDENTITY_TOKEN_FILE",
						Value: `C:\var\run\secrets\eks.amazonaws.com\serviceaccount\token`})}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: tc.annotations}, Spec: tc.spec}
			if tc.nodeOS != "" {
				pod.Spec.NodeSelector = map[string]string{"kubernetes.io/os": tc.nodeOS}
			}
			before := pod.DeepCopy()
			useID := id
			if tc.id != (Identity{}) {
				useID = tc.id
			}
			patch, changed := Mutate(pod, useID, "us-east-1")
			if !equality.Semantic.DeepEqual(pod, before) {
				t.Error("Mutate changed its argument")
			}
			if changed != tc.changed {
				t.Errorf("changed = %v, want %v", changed, tc.changed)
			}
			got := apply(t, pod, patch)
			if !equality.Semantic.DeepEqual(got.Spec, tc.want) {
				g, _ := json.MarshalIndent(got.Spec, "", "  ")
				w, _ := json.MarshalIndent(tc.want, "", "  ")
				t.Errorf("patched spec:\n%s\nwant:\n%s", g, w)
			}
		})
	}
}
