package apiserver_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

// TestSizeLimits: objects too large for their kind or for etcd are refused with a 4xx
// naming the limit, and nothing is stored.
func TestSizeLimits(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	ns := fmt.Sprintf("limits-%d", time.Now().UnixNano())
	if _, err := s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	const mib = 1 << 20

	// wantRefused checks that err is a 4xx whose message says want, and that name is
	// not stored (get returns NotFound).
	wantRefused := func(t *testing.T, err error, status int32, want string, get func() error) {
		t.Helper()
		var se *apierrors.StatusError
		if err == nil {
			t.Fatal("accepted")
		}
		if !errors.As(err, &se) || se.ErrStatus.Code != status {
			t.Fatalf("got %v (%T), want a %d Status", err, err, status)
		}
		if !strings.Contains(se.ErrStatus.Message, want) {
			t.Errorf("message %q does not name the limit (%q)", se.ErrStatus.Message, want)
		}
		if strings.Contains(se.ErrStatus.Message, "etcdserver") || strings.Contains(se.ErrStatus.Message, "rpc error") {
			t.Errorf("message %q carries etcd's or gRPC's own text", se.ErrStatus.Message)
		}
		if err := get(); !apierrors.IsNotFound(err) {
			t.Errorf("the refused object is stored (get: %v)", err)
		}
	}

	t.Run("ConfigMap over 1 MiB", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big-cm"},
			Data: map[string]string{"a": strings.Repeat("a", mib), "b": strings.Repeat("b", mib)}}
		_, err := s.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		wantRefused(t, err, http.StatusUnprocessableEntity, "Too long: may not be more than 1048576 bytes", func() error {
			_, err := s.Client.CoreV1().ConfigMaps(ns).Get(ctx, "big-cm", metav1.GetOptions{})
			return err
		})
	})
	t.Run("ConfigMap binaryData over 1 MiB", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big-bin"},
			Data: map[string]string{"a": strings.Repeat("a", mib/2)}, BinaryData: map[string][]byte{"b": make([]byte, mib/2+1)}}
		_, err := s.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		wantRefused(t, err, http.StatusUnprocessableEntity, "1048576 bytes", func() error {
			_, err := s.Client.CoreV1().ConfigMaps(ns).Get(ctx, "big-bin", metav1.GetOptions{})
			return err
		})
	})
	t.Run("ConfigMap of exactly 1 MiB", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "full-cm"}, Data: map[string]string{"a": strings.Repeat("a", mib)}}
		if _, err := s.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("a ConfigMap of exactly the limit was refused: %v", err)
		}
	})
	t.Run("Secret over 1 MiB", func(t *testing.T) {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "big-secret"}, Data: map[string][]byte{"a": make([]byte, mib+1)}}
		_, err := s.Client.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{})
		wantRefused(t, err, http.StatusUnprocessableEntity, "data: Too long: may not be more than 1048576 bytes", func() error {
			_, err := s.Client.CoreV1().Secrets(ns).Get(ctx, "big-secret", metav1.GetOptions{})
			return err
		})
	})
	t.Run("Secret grown over 1 MiB by an update", func(t *testing.T) {
		sec, err := s.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "growing"},
			Data: map[string][]byte{"a": []byte("small")}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sec.Data["b"] = make([]byte, mib)
		_, err = s.Client.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "1048576 bytes") {
			t.Fatalf("update over the limit: %v, want 422 naming the limit", err)
		}
		got, err := s.Client.CoreV1().Secrets(ns).Get(ctx, "growing", metav1.GetOptions{})
		if err != nil || len(got.Data) != 1 {
			t.Fatalf("after the refused update: %v %v, want the Secret unchanged", got, err)
		}
	})

	// A Pod has no size rule of its own: a big one meets etcd's request limit.
	bigPod := func(name string, size int) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: "busybox", Env: []corev1.EnvVar{{Name: "BIG", Value: strings.Repeat("x", size)}}}}}}
	}
	getPod := func(name string) func() error {
		return func() error {
			_, err := s.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		}
	}
	t.Run("Pod larger than etcd takes", func(t *testing.T) {
		_, err := s.Client.CoreV1().Pods(ns).Create(ctx, bigPod("pod-1m6", 1600*1024), metav1.CreateOptions{})
		wantRefused(t, err, http.StatusRequestEntityTooLarge, "1572864 bytes", getPod("pod-1m6"))
	})
	t.Run("Pod larger than the etcd client sends", func(t *testing.T) {
		_, err := s.Client.CoreV1().Pods(ns).Create(ctx, bigPod("pod-2m5", 2500*1024), metav1.CreateOptions{})
		wantRefused(t, err, http.StatusRequestEntityTooLarge, "1572864 bytes", getPod("pod-2m5"))
	})
	t.Run("Pod grown past etcd's limit by an update", func(t *testing.T) {
		pod, err := s.Client.CoreV1().Pods(ns).Create(ctx, bigPod("pod-grows", 10), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Status.Message = strings.Repeat("m", 1600*1024)
		_, err = s.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		var se *apierrors.StatusError
		if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusRequestEntityTooLarge || !strings.Contains(se.ErrStatus.Message, "1572864 bytes") {
			t.Fatalf("status update past etcd's limit: %v, want 413 naming the limit", err)
		}
		got, err := s.Client.CoreV1().Pods(ns).Get(ctx, "pod-grows", metav1.GetOptions{})
		if err != nil || got.Status.Message != "" {
			t.Fatalf("after the refused update: %v, message of %d bytes", err, len(got.Status.Message))
		}
	})
	t.Run("over etcd's limit only with managedFields", func(t *testing.T) {
		// 10000 variables of 100 bytes: about 1.1 MiB of Pod and 0.6 MiB of managedFields.
		pod := bigPod("pod-fields", 0)
		pod.Spec.Containers[0].Env = nil
		for i := range 10000 {
			pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: fmt.Sprintf("E%05d", i), Value: strings.Repeat("v", 100)})
		}
		got, err := s.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create: %v, want it stored without managedFields", err)
		}
		if len(got.ManagedFields) != 0 {
			t.Errorf("stored with %d managedFields entries, want none", len(got.ManagedFields))
		}
	})
	t.Run("body over 3 MiB", func(t *testing.T) {
		_, err := s.Client.CoreV1().Pods(ns).Create(ctx, bigPod("pod-4m", 4*mib), metav1.CreateOptions{})
		wantRefused(t, err, http.StatusRequestEntityTooLarge, "limit is 3145728", getPod("pod-4m"))
	})
}
