package cluster_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/benchtest"
	"github.com/kubelab/kubelab/internal/cloud/cloudtest"
	"github.com/kubelab/kubelab/internal/cluster"
	"github.com/kubelab/kubelab/internal/cluster/clustertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// BenchmarkCreateToRunning measures the whole storage flow on a hollow cluster of 10
// nodes (3 zones): 100 PVC + Pod pairs created at once (100 writers), and for each pod
// the time from its claim's create call to the pod being Running and Ready as the API
// server's watch shows it: scheduler (WaitForFirstConsumer) → PV controller →
// provisioner → CreateVolume → binding → bind → attach/detach controller → attacher →
// ControllerPublishVolume → kubelet stage/publish (hollow) → containers (hollow) →
// status. The reference in the same cluster, "pod-only", is the same 100 pods with no
// volume: scheduler → kubelet → status.
func BenchmarkCreateToRunning(b *testing.B) {
	tc := startCluster(b, func(c *cluster.Config) {
		c.Nodes = 10
		c.Logger = cloudtest.Logger(b, slog.LevelError)
	})
	for _, withClaim := range []bool{true, false} {
		name := "pvc+pod"
		if !withClaim {
			name = "pod-only"
		}
		b.Run(name+"/100-concurrent", func(b *testing.B) {
			var all []time.Duration
			for i := 0; i < b.N; i++ {
				ns := tc.Namespace(fmt.Sprintf("bench-%s-%d-%d", map[bool]string{true: "pvc", false: "pod"}[withClaim], b.N, i))
				all = append(all, tc.createToRunning(b, ns, 100, withClaim)...)
			}
			reportPercentiles(b, all)
		})
	}
}

// createToRunning creates n pods (each with its own claim when withClaim) in ns from n
// goroutines and returns each pod's time from the first create to Running and Ready.
func (tc *testCluster) createToRunning(b *testing.B, ns string, n int, withClaim bool) []time.Duration {
	ctx := context.Background()
	var mu sync.Mutex
	started := map[string]time.Time{}
	running := map[string]time.Duration{}
	stages := map[string]map[string]time.Duration{} // stage → pod → time since its start
	claimOfPV := map[string]string{}
	mark := func(stage, name string) {
		at := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if stages[stage] == nil {
			stages[stage] = map[string]time.Duration{}
		}
		if _, ok := stages[stage][name]; !ok {
			stages[stage][name] = at.Sub(started[name])
		}
	}
	done := make(chan struct{})
	factory := informers.NewSharedInformerFactoryWithOptions(tc.Client, 0, informers.WithNamespace(ns))
	claimSeen := func(obj any) {
		c, ok := obj.(*corev1.PersistentVolumeClaim)
		if !ok {
			return
		}
		if _, ok := c.Annotations[annSelectedNode]; ok {
			mark("1-node-selected", c.Name)
		}
		if _, ok := c.Annotations["volume.kubernetes.io/storage-provisioner"]; ok {
			mark("2-claim-to-provisioner", c.Name)
		}
		if c.Spec.VolumeName != "" {
			mark("3-claim-names-pv", c.Name)
		}
		if c.Status.Phase == corev1.ClaimBound {
			mark("4-claim-bound", c.Name)
		}
	}
	seen := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		if p.Spec.NodeName != "" {
			mark("5-pod-bound", p.Name)
		}
		if !clustertest.PodRunning(p) {
			return
		}
		at := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if _, ok := running[p.Name]; ok {
			return
		}
		running[p.Name] = at.Sub(started[p.Name])
		if len(running) == n {
			close(done)
		}
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) }}); err != nil {
		b.Fatal(err)
	}
	pvFactory := informers.NewSharedInformerFactory(tc.Client, 0)
	if withClaim {
		if _, err := pvFactory.Core().V1().PersistentVolumes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(o any) {
				if pv, ok := o.(*corev1.PersistentVolume); ok && pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == ns {
					mark("2b-pv-created", pv.Spec.ClaimRef.Name)
					mu.Lock()
					claimOfPV[pv.Name] = pv.Spec.ClaimRef.Name
					mu.Unlock()
				}
			}}); err != nil {
			b.Fatal(err)
		}
		vaSeen := func(o any) {
			va, ok := o.(*storagev1.VolumeAttachment)
			if !ok || va.Spec.Source.PersistentVolumeName == nil {
				return
			}
			mu.Lock()
			claim, ok := claimOfPV[*va.Spec.Source.PersistentVolumeName]
			mu.Unlock()
			if !ok {
				return
			}
			mark("6-va-created", claim)
			if va.Status.Attached {
				mark("7-va-attached", claim)
			}
		}
		if _, err := pvFactory.Storage().V1().VolumeAttachments().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: vaSeen, UpdateFunc: func(_, o any) { vaSeen(o) }}); err != nil {
			b.Fatal(err)
		}
		if _, err := factory.Core().V1().PersistentVolumeClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: claimSeen, UpdateFunc: func(_, o any) { claimSeen(o) }}); err != nil {
			b.Fatal(err)
		}
	}
	stop := make(chan struct{})
	factory.Start(stop)
	pvFactory.Start(stop)
	factory.WaitForCacheSync(stop)
	pvFactory.WaitForCacheSync(stop)
	defer func() { close(stop); factory.Shutdown(); pvFactory.Shutdown() }()

	b.StartTimer()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("p%d", i)
			mu.Lock()
			started[name] = time.Now()
			mu.Unlock()
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
			if withClaim {
				if _, err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
					Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(cluster.DefaultStorageClass),
						AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
				}, metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
				pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}}
				pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
			}
			if _, err := tc.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		mu.Lock()
		got := len(running)
		mu.Unlock()
		b.Fatalf("%d of %d pods Running after 5 minutes", got, n)
	}
	b.StopTimer()
	out := make([]time.Duration, 0, n)
	for _, d := range running {
		out = append(out, d)
	}
	for stage, m := range stages {
		var d []time.Duration
		for _, x := range m {
			d = append(d, x)
		}
		b.ReportMetric(benchtest.Millis(benchtest.Percentile(d, 50)), stage+"-p50-ms")
	}
	// Tear down untimed, and wait for it, so that the next measurement does not share
	// the machine with it: the pods go, then the claims and their volumes.
	if err := tc.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		b.Fatal(err)
	}
	testutil.EventuallyWithin(b, 5*time.Minute, "namespace "+ns+" gone", func() (bool, error) {
		_, err := tc.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	return out
}

func reportPercentiles(b *testing.B, d []time.Duration) {
	benchtest.ReportLatencies(b, "", d)
	b.ReportMetric(0, "ns/op")
}
