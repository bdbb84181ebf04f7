package cluster_test

import (
	"context"
	"net"
	"net/http"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubelab/kubelab/internal/cluster/clustertest"
	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/vpc"
)

// BenchmarkRealServiceLatency measures one HTTP request, each on a new TCP connection, from
// one node's namespace to a busybox httpd pod on another node: to the pod's address over the
// overlay ("direct") and to its Service's ClusterIP, which the first node's proxy DNATs to
// the same pod ("service"). The difference is the proxy's share; both cross the VXLAN
// overlay. p50-us and p99-us are per request.
func BenchmarkRealServiceLatency(b *testing.B) {
	tc := startRealBenchCluster(b)
	ctx := context.Background()
	ns := tc.Namespace("svc-latency")
	nodes := tc.Nodes()
	if _, err := tc.Client.CoreV1().Pods(ns).Create(ctx, webPod(ns, "web", nodes[1].Name), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	svc, err := tc.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}},
	}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	pod := tc.WaitPodRunning(ns, "web")
	from := tc.VPC().NodePath(nodes[0].Name)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: vpc.DialContext(from), DisableKeepAlives: true}}
	testutil.EventuallyWithin(b, clustertest.Timeout, "the Service to answer from node 0", func() (bool, error) {
		_, err := httpVia(from, "http://"+svc.Spec.ClusterIP+"/")
		return err == nil, nil
	})
	for _, target := range []struct{ name, ip string }{{"direct", pod.Status.PodIP}, {"service", svc.Spec.ClusterIP}} {
		b.Run(target.name, func(b *testing.B) {
			url := "http://" + net.JoinHostPort(target.ip, "80") + "/"
			d := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				resp, err := client.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				d = append(d, time.Since(start))
			}
			b.StopTimer()
			sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
			b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-us")
			b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "p99-us")
		})
	}
}
