package kubelet

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func parallel(n, w int, f func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for g := 0; g < w; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// BenchmarkHollowNodes runs NODES (100) hollow kubelets in one process, sharing one client
// and one informer factory as `kubelab up --hollow` does, creates PODS (2,000) pods bound
// to them (16 writers) and reports how fast they become Running, creation included. The
// reference, direct-status, creates the same pods and writes the same Running statuses
// itself through pods/status with 16 workers (one request per pod, as the kubelet's).
func BenchmarkHollowNodes(b *testing.B) {
	nodes, pods := envInt("KUBELAB_BENCH_NODES", 100), envInt("KUBELAB_BENCH_PODS", 2000)
	for _, direct := range []bool{false, true} {
		name := "kubelets"
		if direct {
			name = "direct-status"
		}
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				api := apiservertest.Start(b, apiservertest.Options{})
				cfg := rest.CopyConfig(api.Config)
				cfg.QPS, cfg.Burst = 20000, 40000
				cfg.ContentType = "application/vnd.kubernetes.protobuf"
				c := kubernetes.NewForConfigOrDie(cfg)
				ctx, cancel := context.WithCancel(context.Background())
				factory := informers.NewSharedInformerFactory(c, 0)
				var kls []*Kubelet
				var wg sync.WaitGroup
				for n := 0; n < nodes; n++ {
					zone := []string{"us-east-1a", "us-east-1b", "us-east-1c"}[n%3]
					k, err := New(Config{NodeName: fmt.Sprintf("hollow-%03d", n), Zone: zone, InstanceID: fmt.Sprintf("i-%017d", n),
						Hollow: true, StatusUpdateInterval: time.Minute}, c, factory, Deps{})
					if err != nil {
						b.Fatal(err)
					}
					kls = append(kls, k)
				}
				if !direct {
					factory.Start(ctx.Done())
					for _, k := range kls {
						wg.Add(1)
						go func() { defer wg.Done(); _ = k.Run(ctx) }()
					}
					for _, k := range kls {
						<-k.Registered()
					}
				}
				running := countRunning(b, c, ctx)
				// The API server's metrics are the process's: the run's calls are the
				// difference.
				callsBefore, _ := apiCalls(ctx, c)
				start := time.Now()
				b.StartTimer()
				created := make([]*corev1.Pod, pods)
				err := parallel(pods, 16, func(i int) error {
					p := testPod(fmt.Sprintf("pod-%05d", i), fmt.Sprintf("hollow-%03d", i%nodes))
					out, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
					created[i] = out
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				if direct {
					err := parallel(pods, 16, func(i int) error {
						p := created[i]
						p.Status = runningStatus(p, []ContainerState{{Name: "app", Image: "nginx:1.27", StartedAt: time.Now()}}, "", "10.244.0.2", metav1.Now())
						_, err := c.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{})
						return err
					})
					if err != nil {
						b.Fatal(err)
					}
				}
				deadline := time.Now().Add(10 * time.Minute)
				for running.Load() < int64(pods) && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				b.StopTimer()
				if running.Load() < int64(pods) {
					b.Fatalf("%d of %d pods Running", running.Load(), pods)
				}
				b.ReportMetric(float64(pods)/time.Since(start).Seconds(), "pods/s")
				b.StopTimer()
				if calls, err := apiCalls(ctx, c); err == nil {
					for _, m := range []struct{ key, unit string }{{"pods/status", "status-writes/pod"}, {"mutating", "writes/pod"}} {
						b.ReportMetric(float64(calls[m.key]-callsBefore[m.key])/float64(pods), m.unit)
					}
				}
				cancel()
				wg.Wait()
				factory.Shutdown()
				api.Stop()
			}
		})
	}
}

// apiCalls counts the API server's requests so far from its /metrics
// (apiserver_request_total): writes of pods/status and all writes.
func apiCalls(ctx context.Context, c kubernetes.Interface) (map[string]int, error) {
	raw, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		n, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		label := func(k string) string {
			_, v, ok := strings.Cut(line, k+`="`)
			if !ok {
				return ""
			}
			v, _, _ = strings.Cut(v, `"`)
			return v
		}
		switch label("verb") {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY":
			out["mutating"] += int(n)
			if label("resource") == "pods" && label("subresource") == "status" {
				out["pods/status"] += int(n)
			}
		}
	}
	return out, nil
}

func countRunning(b *testing.B, c kubernetes.Interface, ctx context.Context) *atomic.Int64 {
	var n atomic.Int64
	f := informers.NewSharedInformerFactory(c, 0)
	_, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(o, p any) {
		if o.(*corev1.Pod).Status.Phase != corev1.PodRunning && p.(*corev1.Pod).Status.Phase == corev1.PodRunning {
			n.Add(1)
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return &n
}
