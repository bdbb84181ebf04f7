package podidentitywebhook_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/apiserver"
	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/podidentitywebhook"
	"github.com/kubelab/kubelab/internal/testutil"
)

// Through kubelab's API server: with the webhook serving and its
// MutatingWebhookConfiguration in place, a pod of an annotated ServiceAccount is created
// with the token volume and the environment; one of an unannotated ServiceAccount is
// created as it was sent.
func TestPodCreatedThroughAPIServerIsMutated(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	pki := apiserver.PKI{Dir: filepath.Join(s.DataDir, "pki")}
	cert, key, err := pki.IssueServingCert(filepath.Join(t.TempDir(), "webhook"), "pod-identity-webhook", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w, err := podidentitywebhook.New(podidentitywebhook.Config{CertFile: cert, KeyFile: key,
		Settings: podidentitywebhook.Settings{Region: "us-east-1", RegionalSTS: true},
		Logger:   slog.New(slog.NewTextHandler(t.Output(), nil))}, s.Client)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})

	caPEM, err := os.ReadFile(pki.CACert())
	if err != nil {
		t.Fatal(err)
	}
	mwc := podidentitywebhook.Configuration(l.Addr().String(), caPEM)
	if _, err := s.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), mwc.Name, metav1.DeleteOptions{})
	})

	ns := "irsa-" + strings.ToLower(strings.ReplaceAll(t.Name(), "_", "-"))[:20]
	if _, err := s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	const role = "arn:aws:iam::111122223333:role/ebs-csi"
	for name, ann := range map[string]map[string]string{"with-role": {podidentitywebhook.RoleARNAnnotation: role}, "plain": nil} {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}}
		if _, err := s.Client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod := func(sa string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: sa}, Spec: corev1.PodSpec{ServiceAccountName: sa,
			Containers: []corev1.Container{{Name: "app", Image: "busybox", Env: []corev1.EnvVar{{Name: "AWS_REGION", Value: "eu-west-1"}}}}}}
	}
	// The API server reads the configuration through its informer: dry runs (the
	// webhook has no side effects) until it is called.
	testutil.EventuallyWithin(t, time.Minute, "the webhook called on a dry run", func() bool {
		p, err := s.Client.CoreV1().Pods(ns).Create(ctx, pod("with-role"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && len(p.Spec.Containers[0].Env) > 1
	})

	got, err := s.Client.CoreV1().Pods(ns).Create(ctx, pod("with-role"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range got.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	want := map[string]string{"AWS_REGION": "eu-west-1", "AWS_STS_REGIONAL_ENDPOINTS": "regional", "AWS_ROLE_ARN": role,
		"AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/secrets/eks.amazonaws.com/serviceaccount/token"}
	if len(env) != len(want) {
		t.Errorf("env %v, want %v", env, want)
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	var token *corev1.ServiceAccountTokenProjection
	for _, v := range got.Spec.Volumes {
		if v.Name == "aws-iam-token" && v.Projected != nil && len(v.Projected.Sources) == 1 {
			token = v.Projected.Sources[0].ServiceAccountToken
		}
	}
	if token == nil || token.Audience != "sts.amazonaws.com" || token.ExpirationSeconds == nil || *token.ExpirationSeconds != 86400 || token.Path != "token" {
		t.Errorf("volumes %+v, want the aws-iam-token projection for sts.amazonaws.com, 86400s", got.Spec.Volumes)
	}
	mounted := false
	for _, m := range got.Spec.Containers[0].VolumeMounts {
		mounted = mounted || m.Name == "aws-iam-token" && m.MountPath == "/var/run/secrets/eks.amazonaws.com/serviceaccount" && m.ReadOnly
	}
	if !mounted {
		t.Errorf("mounts %+v, want aws-iam-token read-only", got.Spec.Containers[0].VolumeMounts)
	}

	plain, err := s.Client.CoreV1().Pods(ns).Create(ctx, pod("plain"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plain.Spec.Containers[0].Env) != 1 {
		t.Errorf("the pod of an unannotated service account got env %v", plain.Spec.Containers[0].Env)
	}
	for _, v := range plain.Spec.Volumes {
		if v.Name == "aws-iam-token" {
			t.Errorf("the pod of an unannotated service account got the token volume")
		}
	}
}
