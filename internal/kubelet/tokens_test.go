package kubelet

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// fakeTokens is an API server that answers TokenRequests of a fake clientset with
// "token-<n>" valid for the asked lifetime from the clock's now; failing makes it
// refuse.
type fakeTokens struct {
	clock *clocktesting.FakeClock

	mu       sync.Mutex
	requests []*authenticationv1.TokenRequest
	sas      []string
	failing  bool
}

func (f *fakeTokens) client() *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		create, ok := a.(k8stesting.CreateAction)
		if !ok || a.GetSubresource() != "token" {
			return false, nil, nil
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.failing {
			return true, nil, errors.New("the API server is away")
		}
		req := create.GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		f.requests = append(f.requests, req)
		f.sas = append(f.sas, a.GetNamespace()+"/"+create.(k8stesting.CreateActionImpl).Name)
		out := req.DeepCopy()
		out.Status = authenticationv1.TokenRequestStatus{
			Token:               fmt.Sprintf("token-%d", len(f.requests)),
			ExpirationTimestamp: metav1.NewTime(f.clock.Now().Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second)),
		}
		return true, out, nil
	})
	return c
}

func (f *fakeTokens) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

func tokenPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "web", UID: "uid-1"},
		Spec: corev1.PodSpec{ServiceAccountName: "builder"}}
}

func TestTokenRefreshAt(t *testing.T) {
	issued := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := func(seconds int64) *authenticationv1.TokenRequest {
		return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds},
			Status: authenticationv1.TokenRequestStatus{ExpirationTimestamp: metav1.NewTime(issued.Add(time.Duration(seconds) * time.Second))}}
	}
	for _, tc := range []struct {
		seconds int64
		want    time.Duration
	}{
		{3607, 3607 * time.Second * 8 / 10}, // 80% of its lifetime
		{600, 8 * time.Minute},
		{29 * 3600, 29 * 3600 * time.Second * 8 / 10},
		{30 * 3600, 24 * time.Hour},
		{7 * 86400, 24 * time.Hour}, // a day after it was issued
	} {
		if got := tokenRefreshAt(tr(tc.seconds)).Sub(issued); got != tc.want {
			t.Errorf("%d s token: refresh after %v, want %v", tc.seconds, got, tc.want)
		}
	}
}

func TestServiceAccountTokensRequestCacheAndRefresh(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	api := &fakeTokens{clock: clock}
	m := newServiceAccountTokens(clientTokenRequester(api.client()), clock)
	ctx := context.Background()
	pod := tokenPod()
	src := &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}

	tok, refresh, err := m.token(ctx, pod, src)
	if err != nil || tok != "token-1" {
		t.Fatalf("token = %q, %v", tok, err)
	}
	want := authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3607),
		BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "uid-1"}}
	if !reflect.DeepEqual(api.requests[0].Spec, want) || api.sas[0] != "ns1/builder" {
		t.Errorf("request for %s: %+v\nwant %+v", api.sas[0], api.requests[0].Spec, want)
	}
	if d := refresh.Sub(clock.Now()); d != 3607*time.Second*8/10 {
		t.Errorf("refresh in %v", d)
	}

	// Until then, the cached token.
	clock.Step(40 * time.Minute)
	if tok, _, _ := m.token(ctx, pod, src); tok != "token-1" || api.count() != 1 {
		t.Errorf("within its lifetime: %q after %d requests", tok, api.count())
	}
	// Another audience is another token; a source without expirationSeconds asks an hour.
	vault := &corev1.ServiceAccountTokenProjection{Path: "vault", Audience: "vault"}
	if tok, _, _ := m.token(ctx, pod, vault); tok != "token-2" || !reflect.DeepEqual(api.requests[1].Spec.Audiences, []string{"vault"}) ||
		*api.requests[1].Spec.ExpirationSeconds != 3600 {
		t.Errorf("vault token %q, request %+v", tok, api.requests[1].Spec)
	}

	// Past 80% of its lifetime: a new one.
	clock.Step(10 * time.Minute)
	if tok, _, _ := m.token(ctx, pod, src); tok != "token-3" {
		t.Errorf("after 50 minutes: %q", tok)
	}

	// A refresh that fails keeps the valid token and tries again soon.
	clock.Step(50 * time.Minute)
	api.failing = true
	tok, refresh, err = m.token(ctx, pod, src)
	if err != nil || tok != "token-3" || refresh.Sub(clock.Now()) != tokenRetry {
		t.Errorf("failed refresh: %q, retry in %v, %v", tok, refresh.Sub(clock.Now()), err)
	}
	// Once it expired, the error.
	clock.Step(time.Hour)
	if _, _, err := m.token(ctx, pod, src); err == nil {
		t.Error("an expired token was given out")
	}

	// A forgotten pod's tokens are requested anew.
	api.failing = false
	m.forget(pod.UID)
	if tok, _, _ := m.token(ctx, pod, vault); tok == "token-2" {
		t.Error("the forgotten pod's token was reused")
	}
}

// A projected volume's token file comes from the token source, with the volume's mode.
func TestProjectedPayloadToken(t *testing.T) {
	pod := configPod()
	src := &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o644), Sources: []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
		{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
	}}
	in := payloadInput{objects: testObjects(), token: func(p *corev1.Pod, s *corev1.ServiceAccountTokenProjection) (string, error) {
		return "jwt-of-" + p.Name + "-" + s.Path, nil
	}}
	got, err := projectedPayload(pod, src, in)
	if err != nil {
		t.Fatal(err)
	}
	wantFiles(t, "projected", got, map[string]string{"token": "jwt-of-" + pod.Name + "-token (644)", "namespace": "ns1 (644)"})

	// With a fsGroup the token is 0600 (made group-readable by the writer).
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](2000)}
	got, err = projectedPayload(pod, src, in)
	if err != nil || got["token"].mode != 0o600 {
		t.Errorf("token with a fsGroup: %v, %v", got["token"], err)
	}

	in.token = func(*corev1.Pod, *corev1.ServiceAccountTokenProjection) (string, error) {
		return "", errors.New("fetch token: refused")
	}
	if _, err := projectedPayload(pod, src, in); err == nil || err.Error() != "fetch token: refused" {
		t.Errorf("a token that cannot be had: %v", err)
	}
	in.token = nil
	if _, err := projectedPayload(pod, src, in); err == nil || err.Error() != "serviceAccountToken sources are not supported on this node" {
		t.Errorf("a node without tokens: %v", err)
	}
}

// Against the API server, the kubelet's request gets a token bound to the pod that
// authenticates as the pod's service account, and stops doing so once the pod is gone.
func TestServiceAccountTokensFromTheAPIServer(t *testing.T) {
	api := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	testutil.Eventually(t, "the default service account", func() (bool, error) {
		_, err := api.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	pod, err := api.Client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "tokened"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var src *corev1.ServiceAccountTokenProjection
	for _, v := range pod.Spec.Volumes {
		if v.Projected != nil && v.Projected.Sources[0].ServiceAccountToken != nil {
			src = v.Projected.Sources[0].ServiceAccountToken
		}
	}
	if src == nil {
		t.Fatalf("the pod has no token volume: %+v", pod.Spec.Volumes)
	}
	m := newServiceAccountTokens(clientTokenRequester(api.Client), clock.RealClock{})
	token, refresh, err := m.token(ctx, pod, src)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(refresh); d < 47*time.Minute || d > 49*time.Minute {
		t.Errorf("refresh in %v, want 80%% of 3607 s", d)
	}
	withToken := kubernetes.NewForConfigOrDie(&rest.Config{Host: api.URL, BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: api.Config.CAFile, CAData: api.Config.CAData}})
	asPod := func() error {
		_, err := withToken.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		if err == nil || apierrors.IsForbidden(err) && strings.Contains(err.Error(), `"system:serviceaccount:default:default"`) {
			return nil
		}
		return err
	}
	if err := asPod(); err != nil {
		t.Fatalf("the pod's token: %v", err)
	}
	if err := api.Client.CoreV1().Pods("default").Delete(ctx, "tokened", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the token of the deleted pod refused", func() (bool, error) {
		return apierrors.IsUnauthorized(asPod()), nil
	})
}
