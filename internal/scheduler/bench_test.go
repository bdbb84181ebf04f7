package scheduler

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// benchClient is a protobuf client without client-side throttling getting in the way.
func benchClient(b *testing.B, cfg *rest.Config) kubernetes.Interface {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 20000, 40000
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return kubernetes.NewForConfigOrDie(cfg)
}

// parallel runs f(i) for i in [0, n) on w goroutines.
func parallel(n, w int, f func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for g := 0; g < w; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
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

var benchZones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}

// setupBench creates nodes hollow-node style (Node, status, CSINode) and pending pods,
// with a bound CSI PV per pod when withPVC.
func setupBench(b testing.TB, c kubernetes.Interface, nodes, pods int, withPVC bool) {
	ctx := context.Background()
	err := parallel(nodes, 16, func(i int) error {
		zone := benchZones[i%len(benchZones)]
		n := makeNode(fmt.Sprintf("node-%04d", i), "4", zoneLabel(zone), func(n *corev1.Node) {
			n.Labels["topology.ebs.csi.aws.com/zone"] = zone
			n.Status.Allocatable[corev1.ResourceMemory] = resource.MustParse("32Gi")
		})
		status := n.Status
		out, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		out.Status = status
		if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, out, metav1.UpdateOptions{}); err != nil {
			return err
		}
		_, err = c.StorageV1().CSINodes().Create(ctx, &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: n.Name},
			Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "ebs.csi.aws.com", NodeID: "i-" + n.Name,
				TopologyKeys: []string{"topology.ebs.csi.aws.com/zone"}, Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](25)}}}}},
			metav1.CreateOptions{})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	class := "gp3"
	if withPVC {
		mode := storagev1.VolumeBindingWaitForFirstConsumer
		if _, err := c.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class},
			Provisioner: "ebs.csi.aws.com", VolumeBindingMode: &mode}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	err = parallel(pods, 16, func(i int) error {
		opts := []podOpt{cpu("100m")}
		if withPVC {
			name := fmt.Sprintf("data-%05d", i)
			pvName := "pv-" + name
			zone := benchZones[i%len(benchZones)]
			pvc := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes"}},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: &class, VolumeName: pvName,
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
			}
			out, err := c.CoreV1().PersistentVolumeClaims("default").Create(ctx, pvc, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			pv := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: pvName},
				Spec: corev1.PersistentVolumeSpec{
					Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}, StorageClassName: class,
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					ClaimRef:    &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "default", Name: name, UID: out.UID},
					PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
						Driver: "ebs.csi.aws.com", VolumeHandle: "vol-" + name}},
					NodeAffinity: zoneAffinity("topology.ebs.csi.aws.com/zone", zone),
				},
			}
			if _, err := c.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
				return err
			}
			opts = append(opts, withClaim(name))
		}
		_, err := c.CoreV1().Pods("default").Create(ctx, makePod(fmt.Sprintf("pod-%05d", i), opts...), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
}

// bindWatch follows, from a watch of its own, the pods that get a node: how many, on which
// node, and when the first and the last did.
type bindWatch struct {
	bound atomic.Int64
	tick  chan struct{}

	mu          sync.Mutex
	nodeOf      map[string]string // pod name → node
	first, last time.Time
}

func watchBinds(b *testing.B, c kubernetes.Interface, ctx context.Context) *bindWatch {
	w := &bindWatch{tick: make(chan struct{}, 1), nodeOf: map[string]string{}}
	f := informers.NewSharedInformerFactory(c, 0)
	inf := f.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(o, n any) {
		old, pod := o.(*corev1.Pod), n.(*corev1.Pod)
		if old.Spec.NodeName != "" || pod.Spec.NodeName == "" {
			return
		}
		now := time.Now()
		w.mu.Lock()
		if w.first.IsZero() {
			w.first = now
		}
		w.last = now
		w.nodeOf[pod.Name] = pod.Spec.NodeName
		w.mu.Unlock()
		w.bound.Add(1)
		select {
		case w.tick <- struct{}{}:
		default:
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return w
}

// wait returns when want pods are bound; it fails the benchmark after 15 minutes or when
// died (the scheduler's end, nil for none) says something first.
func (w *bindWatch) wait(b *testing.B, want int, died <-chan error) {
	deadline := time.After(15 * time.Minute)
	for w.bound.Load() < int64(want) {
		select {
		case <-w.tick:
		case err := <-died:
			b.Fatalf("the scheduler ended with %d of %d pods bound: %v", w.bound.Load(), want, err)
		case <-deadline:
			b.Fatalf("only %d of %d pods bound", w.bound.Load(), want)
		}
	}
}

// BenchmarkSchedulingThroughput schedules PODS pending pods (10,000) onto NODES nodes
// (1,000) with the scheduler running against the real API server, and reports pods/s. The
// reference, bare-binding, binds the same pods through pods/binding round-robin with the
// same API server and as many concurrent requests, without any scheduling decision.
func BenchmarkSchedulingThroughput(b *testing.B) {
	nodes, pods := envInt("KUBELAB_BENCH_NODES", 1000), envInt("KUBELAB_BENCH_PODS", 10000)
	for _, tc := range []struct {
		name    string
		withPVC bool
		bare    bool
	}{{"plain", false, false}, {"bare-binding", false, true}, {"pvc", true, false}} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				api := apiservertest.Start(b, apiservertest.Options{})
				c := benchClient(b, api.Config)
				setupBench(b, c, nodes, pods, tc.withPVC)
				ctx, cancel := context.WithCancel(context.Background())
				w := watchBinds(b, c, ctx)
				var elapsed time.Duration
				if tc.bare {
					start := time.Now()
					b.StartTimer()
					err := parallel(pods, 16, func(i int) error {
						return c.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{
							ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("pod-%05d", i)},
							Target:     corev1.ObjectReference{Kind: "Node", Name: fmt.Sprintf("node-%04d", i%nodes)}}, metav1.CreateOptions{})
					})
					if err != nil {
						b.Fatal(err)
					}
					w.wait(b, pods, nil)
					b.StopTimer()
					elapsed = time.Since(start)
				} else {
					factory := informers.NewSharedInformerFactory(c, 0)
					s, err := New(Config{}, c, factory)
					if err != nil {
						b.Fatal(err)
					}
					factory.Start(ctx.Done())
					factory.WaitForCacheSync(ctx.Done())
					done := make(chan error, 1)
					start := time.Now()
					b.StartTimer()
					go func() { done <- s.Run(ctx) }()
					w.wait(b, pods, nil)
					b.StopTimer()
					elapsed = time.Since(start)
					cancel()
					<-done
				}
				cancel()
				b.ReportMetric(float64(pods)/elapsed.Seconds(), "pods/s")
				api.Stop()
			}
		})
	}
}
