package kuberuntime

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func dockerConfigJSONSecret(name string, auths map[string]string) *corev1.Secret {
	var parts []string
	for loc, userpass := range auths {
		parts = append(parts, fmt.Sprintf("%q:{\"auth\":%q}", loc, base64.StdEncoding.EncodeToString([]byte(userpass))))
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{` + strings.Join(parts, ",") + `}}`)}}
}

func TestKeyringLookup(t *testing.T) {
	secrets := []*corev1.Secret{
		dockerConfigJSONSecret("hub", map[string]string{"https://index.docker.io/v1/": "hub:pw"}),
		dockerConfigJSONSecret("corp", map[string]string{
			"registry.corp.example":         "corp:pw",
			"registry.corp.example/team":    "team:pw",
			"*.mirror.example":              "glob:pw",
			"http://ports.example:5000/v2/": "port:pw",
		}),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "legacy"}, Type: corev1.SecretTypeDockercfg,
			Data: map[string][]byte{corev1.DockerConfigKey: []byte(`{"quay.io":{"username":"q","password":"qpw"}}`)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "opaque"}, Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"quay.io":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("no:no")) + `"}}}`)}},
	}
	k, err := newKeyring(secrets)
	if err != nil {
		t.Fatal(err)
	}
	for image, want := range map[string]string{
		"postgres:16":                                       "hub",
		"docker.io/library/redis":                           "hub",
		"kubelab-test/app:1":                                "hub",
		"registry.corp.example/team/app:1":                  "team corp", // most specific first
		"registry.corp.example/other/app":                   "corp",
		"eu.mirror.example/x/y:1":                           "glob",
		"a.eu.mirror.example/x":                             "", // a glob label is one label
		"ports.example:5000/app":                            "port",
		"ports.example/app":                                 "",  // ports must match
		"quay.io/org/app@sha256:" + strings.Repeat("a", 64): "q", // only typed secrets count
		"registry.k8s.io/pause:3.10":                        "",
	} {
		var got []string
		for _, a := range k.lookup(image) {
			if a.ServerAddress != "" {
				t.Errorf("lookup(%s) gave a server address %q", image, a.ServerAddress)
			}
			got = append(got, a.Username)
		}
		if strings.Join(got, " ") != want {
			t.Errorf("lookup(%s) = %q, want %q", image, got, want)
		}
	}

	bad := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "bad"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"x.example":{"auth":"bm9jb2xvbg=="}}}`)}} // "nocolon"
	if _, err := newKeyring([]*corev1.Secret{bad}); err == nil || strings.Contains(err.Error(), "nocolon") || !strings.Contains(err.Error(), "default/bad") {
		t.Errorf("a malformed auth: %v, want an error naming the secret and not its content", err)
	}
}

// TestSyncPodPullSecrets: the pod's imagePullSecrets reach CRI PullImage, each matching
// credential in turn until one pulls; a secret that cannot be read is reported and the
// pull goes on without it.
func TestSyncPodPullSecrets(t *testing.T) {
	r, env := newTestRuntime(t)
	const image = "registry.corp.example/team/app:1"
	r.cfg.Objects = &fakeObjects{secrets: map[string]*corev1.Secret{
		"default/old": dockerConfigJSONSecret("old", map[string]string{"registry.corp.example/team": "alice:expired"}),
		"default/new": dockerConfigJSONSecret("new", map[string]string{"registry.corp.example": "alice:s3cret"}),
	}}
	env.cri.RequireAuth(image, "alice", "s3cret")
	pod := testPod(corev1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0].Image = image
	pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "old"}, {Name: "gone"}, {Name: "new"}}
	if _, err := r.SyncPod(context.Background(), pod, nil); err != nil {
		t.Fatalf("SyncPod: %v", err)
	}
	var got []string
	for _, a := range env.cri.PullAuths() {
		got = append(got, a.GetUsername()+":"+a.GetPassword())
	}
	if strings.Join(got, " ") != "alice:expired alice:s3cret" {
		t.Errorf("PullImage credentials = %q, want the more specific location's first, then the other", got)
	}
	if evs := env.events(); !hasEvent(evs, "Warning FailedToRetrieveImagePullSecret Unable to retrieve some image pull secrets (gone); attempting to pull the image may not succeed.") {
		t.Errorf("events = %q", evs)
	}

	// Without matching credentials the pull carries none, and fails.
	r2, env2 := newTestRuntime(t)
	env2.cri.RequireAuth(image, "alice", "s3cret")
	pod2 := testPod(corev1.RestartPolicyAlways, nil, "app")
	pod2.Spec.Containers[0].Image = image
	st, err := r2.SyncPod(context.Background(), pod2, nil)
	if !errors.Is(err, ErrImagePull) {
		t.Fatalf("err = %v, want ErrImagePull", err)
	}
	if auths := env2.cri.PullAuths(); len(auths) != 1 || auths[0] != nil {
		t.Errorf("PullImage credentials = %v, want one pull with none", auths)
	}
	if app := stateOf(t, st, "app"); !strings.Contains(app.Message, "pull access denied") {
		t.Errorf("state = %+v", app)
	}
}

// TestSyncPodPullOffline: on a node whose images come only from kubelab's registry, a
// failed pull says so.
func TestSyncPodPullOffline(t *testing.T) {
	r, env := newTestRuntime(t)
	r.cfg.OfflineImages = true
	const image = "postgres:16"
	env.cri.FailPull(image, status.Error(codes.NotFound, `failed to pull and unpack image "docker.io/library/postgres:16": failed to resolve reference "docker.io/library/postgres:16": docker.io/library/postgres:16: not found`))
	pod := testPod(corev1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0].Image = image
	st, err := r.SyncPod(context.Background(), pod, nil)
	if !errors.Is(err, ErrImagePull) {
		t.Fatalf("err = %v, want ErrImagePull", err)
	}
	app := stateOf(t, st, "app")
	if app.Reason != "ErrImagePull" || !strings.Contains(app.Message, "not found; kubelab runs offline (kubelab up --offline)") ||
		!strings.HasSuffix(app.Message, "which does not have this one (add it with kubelab image import)") {
		t.Errorf("state = %+v, want ErrImagePull naming offline mode", app)
	}
	if evs := env.events(); !hasEvent(evs, `Warning Failed Failed to pull image "postgres:16": `) || !strings.Contains(strings.Join(evs, "\n"), "offline") {
		t.Errorf("events = %q", evs)
	}
}
