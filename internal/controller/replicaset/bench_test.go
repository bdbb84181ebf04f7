package replicaset

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

const benchReplicas = 100

// BenchmarkReplicaSetScaleUp measures a ReplicaSet of 100 going from created to 100
// pods seen in its status, on the real API server; "reference" creates the same 100
// pods straight through client-go, 16 at a time, in the same run.
func BenchmarkReplicaSetScaleUp(b *testing.B) {
	// Logs would interleave with the figures.
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.DiscardHandler))
	b.Cleanup(func() { slog.SetDefault(prev) })
	s := apiservertest.Start(b, apiservertest.Options{})
	ctx := context.Background()
	c := s.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	cleanup := func() {
		_ = c.AppsV1().ReplicaSets("bench").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = c.CoreV1().Pods("bench").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
		_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			l, err := c.CoreV1().Pods("bench").List(ctx, metav1.ListOptions{})
			return err == nil && len(l.Items) == 0, nil
		})
	}
	b.Run("controller", func(b *testing.B) {
		factory := informers.NewSharedInformerFactory(c, 0)
		ctrl, err := New(Config{}, c, factory)
		if err != nil {
			b.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		factory.Start(cctx.Done())
		done := make(chan error, 1)
		go func() { done <- ctrl.Run(cctx) }()
		defer func() { cancel(); <-done; factory.Shutdown() }()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			cleanup()
			rs := newRS(fmt.Sprintf("web-%d", i), benchReplicas)
			b.StartTimer()
			if _, err := c.AppsV1().ReplicaSets("bench").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				got, err := c.AppsV1().ReplicaSets("bench").Get(ctx, rs.Name, metav1.GetOptions{})
				return err == nil && got.Status.Replicas == benchReplicas, nil
			}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		cleanup()
	})
	b.Run("reference", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			cleanup()
			tmpl := newRS(fmt.Sprintf("ref-%d", i), benchReplicas).Spec.Template
			b.StartTimer()
			var wg sync.WaitGroup
			sem := make(chan struct{}, 16)
			for j := 0; j < benchReplicas; j++ {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "ref-", Labels: tmpl.Labels}, Spec: tmpl.Spec}
					if _, err := c.CoreV1().Pods("bench").Create(ctx, p, metav1.CreateOptions{}); err != nil {
						b.Error(err)
					}
				}()
			}
			wg.Wait()
		}
		b.StopTimer()
		cleanup()
	})
}
