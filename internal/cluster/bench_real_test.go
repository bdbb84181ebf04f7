package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/benchtest"
	"github.com/kubelab/kubelab/internal/cloud/cloudtest"
	"github.com/kubelab/kubelab/internal/cluster"
	"github.com/kubelab/kubelab/internal/cluster/clustertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// The benchmarks of real nodes (root): the cluster's boot to three Ready nodes on a data
// dir started before, stateless pods to Running against `ctr run` of the same image on
// the same containerds, PVC + Pod pairs to Running with the time of each step against a
// bare mkfs.ext4 + mount of a loop device, and the memory of the process running the
// cluster. They report figures, they assert none.
//
// KUBELAB_BENCH_CPUPROFILE=FILE writes a CPU profile of the process during the
// 30-concurrent part of BenchmarkRealClaimPodStart (the last count's), and
// KUBELAB_BENCH_MEMPROFILE=FILE a heap profile with its 30 pairs running.

// benchRealPrereqs skips b unless real nodes can run here, and waits until no other
// kubelab cluster runs real nodes on the machine.
func benchRealPrereqs(b *testing.B) {
	b.Helper()
	testutil.RequireRoot(b, append(clustertest.RealNodeTools, "ctr", "/usr/lib/cni/loopback", "losetup")...)
	waitNoOtherRealNodes(b)
}

// otherRealNodes lists the containerds of real nodes on this machine that are not under
// dataDir (any when it is empty): other kubelab clusters, whose nodes have the same names
// as ours, hence the same cgroup parents.
func otherRealNodes(dataDir string) []string {
	var out []string
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cmdlines {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
		if filepath.Base(args[0]) != "containerd" || !strings.Contains(string(b), "/nodes/ip-") ||
			(dataDir != "" && strings.Contains(string(b), dataDir+"/")) {
			continue
		}
		out = append(out, filepath.Base(filepath.Dir(f))+": "+strings.Join(args, " "))
	}
	return out
}

// waitNoOtherRealNodes waits up to five minutes until no other kubelab cluster runs real
// nodes on this machine, and skips b if one still does.
func waitNoOtherRealNodes(b *testing.B) {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		others := otherRealNodes("")
		if len(others) == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Skipf("another kubelab cluster runs real nodes here; ours would share their names and cgroups: %v", others)
		}
		time.Sleep(2 * time.Second)
	}
}

// othersWatch counts, every five seconds, the containerds of other kubelab clusters' real
// nodes: the most it saw since the last take tells whether another cluster shared the
// machine (and our nodes' names and cgroups) during a measurement.
type othersWatch struct {
	most atomic.Int32
	stop chan struct{}
}

func watchOthers(b *testing.B, dataDir string) *othersWatch {
	w := &othersWatch{stop: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if n := int32(len(otherRealNodes(dataDir))); n > w.most.Load() {
				w.most.Store(n)
			}
			select {
			case <-w.stop:
				return
			case <-time.After(5 * time.Second):
			}
		}
	}()
	b.Cleanup(func() { close(w.stop); <-done })
	return w
}

// take returns the most containerds of other clusters seen since the last take.
func (w *othersWatch) take() float64 { return float64(w.most.Swap(0)) }

// startRealBenchCluster runs three real nodes, one per zone, logging only errors, runs a
// pod on each (pause and busybox pulled, as on nodes that ran pods before), and checks at
// the end that nothing of it is left on the machine.
func startRealBenchCluster(b *testing.B) *testCluster {
	b.Helper()
	benchRealPrereqs(b)
	tc := &testCluster{clustertest.Start(b, clustertest.Options{Real: true, CSIInProcess: true, Tweak: func(c *cluster.Config) {
		// The add-on in process, as the recorded figures were measured.
		c.Logger = cloudtest.Logger(b, slog.LevelError)
	}})}
	tc.runOnePodPerNode(b)
	return tc
}

// BenchmarkRealUp measures `kubelab up` of three real nodes on a data dir that was
// started once before (images built, pause and busybox in every node's containerd): from
// building the cluster to every node Ready, and the stop that follows (everything torn
// down). Each op is three starts and stops on one data dir, after a first start that is
// reported apart. "up-defaults" runs the nodes as `kubelab up` does (node status every
// 10 s); "node-status-1s" computes the node status every second, as the other tests do,
// which shows how much of the boot is the wait for the kubelet's next node status.
func BenchmarkRealUp(b *testing.B) {
	benchRealPrereqs(b)
	bin := testutil.Commands(b)
	pause, plugin := filepath.Join(bin, "kubelab-pause"), filepath.Join(bin, "kubelab-cni")
	for _, interval := range []time.Duration{0, time.Second} {
		name := map[time.Duration]string{0: "up-defaults", time.Second: "node-status-1s"}[interval]
		b.Run(name, func(b *testing.B) {
			b.StopTimer()
			dir, err := os.MkdirTemp("", "klb")
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { os.RemoveAll(dir) })
			// The ports stay across starts, as `kubelab up`'s defaults do.
			cfg := cluster.Config{
				ControlPlaneConfig: cluster.ControlPlaneConfig{DataDir: dir, SecurePort: apiservertest.FreePort(b),
					EtcdClientPort: apiservertest.FreePort(b), EtcdPeerPort: apiservertest.FreePort(b)},
				PauseBinary: pause, CNIBinary: plugin, NodeStatusInterval: interval, CSIInProcess: true,
				Offline: true, // benchmarks never leave the machine
			}
			var nodes []string
			b.Cleanup(func() { clustertest.AssertNothingLeft(b, dir, nodes...) })
			others := watchOthers(b, dir)
			load := loadAverage()
			first := bootReal(b, cfg)
			for _, n := range first.c.Nodes() {
				nodes = append(nodes, n.Name)
			}
			first.runOnePodPerNode(b)
			firstStop := first.stop(b)

			var ready, apiserver, registry, stops []time.Duration
			for i := 0; i < 3*b.N; i++ {
				b.StartTimer()
				r := bootReal(b, cfg)
				b.StopTimer()
				ready, apiserver, registry = append(ready, r.ready), append(apiserver, r.apiserver), append(registry, r.registry)
				if i == 0 && testing.Verbose() {
					b.Logf("%s: first log record of each kind, from New:%s", name, r.steps.String())
				}
				stops = append(stops, r.stop(b))
			}
			b.ReportMetric(first.ready.Seconds(), "first-boot-s")
			b.ReportMetric(benchtest.Millis(firstStop), "first-stop-ms")
			b.ReportMetric(benchtest.Millis(benchtest.Percentile(apiserver, 50)), "apiserver-ready-p50-ms")
			b.ReportMetric(benchtest.Millis(benchtest.Percentile(registry, 50)), "registry-ready-p50-ms")
			benchtest.ReportLatencies(b, "ready", ready)
			b.ReportMetric(benchtest.Millis(benchtest.Percentile(stops, 50)), "stop-p50-ms")
			b.ReportMetric(load, "load1")
			b.ReportMetric(others.take(), "other-real-nodes")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// realBoot is one start of a cluster by BenchmarkRealUp.
type realBoot struct {
	c       *cluster.Cluster
	cfg     cluster.Config
	cancel  context.CancelFunc
	done    chan error
	stopped bool
	steps   *stepLog
	// Times from New to the API server, the image registry and the whole cluster ready.
	apiserver, registry, ready time.Duration
}

// bootReal builds and runs a cluster on cfg and waits until it is ready.
func bootReal(b *testing.B, cfg cluster.Config) *realBoot {
	b.Helper()
	steps := newStepLog(b)
	cfg.Logger = slog.New(steps)
	start := time.Now()
	steps.t0 = start
	c, err := cluster.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &realBoot{c: c, cfg: cfg, cancel: cancel, done: make(chan error, 1), steps: steps}
	go func() { r.done <- c.Run(ctx) }()
	b.Cleanup(func() { // a benchmark that failed before stopping it
		if !r.stopped {
			r.stop(b)
		}
	})
	var wg sync.WaitGroup
	for _, w := range []struct {
		ch <-chan struct{}
		at *time.Duration
	}{{c.APIServerReady(), &r.apiserver}, {c.Registry().Ready(), &r.registry}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-w.ch:
				*w.at = time.Since(start)
			case <-ctx.Done():
			}
		}()
	}
	select {
	case <-c.Ready():
		r.ready = time.Since(start)
	case err := <-r.done:
		r.stopped = true
		cancel()
		b.Fatalf("cluster stopped before it was ready: %v", err)
	case <-time.After(3 * time.Minute):
		r.stopped = true
		cancel()
		<-r.done
		b.Fatal("cluster not ready after 3 minutes")
	}
	wg.Wait()
	return r
}

// stop ends the cluster and returns how long it took to stop everything.
func (r *realBoot) stop(b *testing.B) time.Duration {
	b.Helper()
	start := time.Now()
	r.stopped = true
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil && !errors.Is(err, context.Canceled) {
			b.Fatalf("cluster stopped with: %v", err)
		}
	case <-time.After(2 * time.Minute):
		b.Fatal("cluster did not stop within 2 minutes")
	}
	return time.Since(start)
}

// runOnePodPerNode runs a busybox pod on each node (pulling pause and busybox into its
// containerd, as a node that ran pods before has them) and deletes them.
func (r *realBoot) runOnePodPerNode(b *testing.B) {
	b.Helper()
	tc := &testCluster{clustertest.Attach(b, r.c, r.cfg)}
	tc.runOnePodPerNode(b)
}

func (tc *testCluster) runOnePodPerNode(b *testing.B) {
	b.Helper()
	ns := tc.Namespace("warm")
	for i, n := range tc.Nodes() {
		p := busyboxPod(ns, fmt.Sprintf("warm-%d", i), corev1.RestartPolicyAlways, "sleep 3600")
		p.Spec.NodeName = n.Name
		if _, err := tc.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range tc.Nodes() {
		tc.WaitPodRunning(ns, fmt.Sprintf("warm-%d", i))
	}
	tc.deleteNamespace(ns)
}

// stepLog is a slog handler that records when each distinct log record (component,
// message) first appears, and passes errors on to the benchmark's log.
type stepLog struct {
	t0    time.Time
	attrs []slog.Attr
	next  slog.Handler
	s     *stepSeen
}

type stepSeen struct {
	mu    sync.Mutex
	first map[string]time.Duration
}

func newStepLog(b *testing.B) *stepLog {
	return &stepLog{next: cloudtest.Logger(b, slog.LevelError).Handler(), s: &stepSeen{first: map[string]time.Duration{}}}
}

func (h *stepLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *stepLog) Handle(ctx context.Context, r slog.Record) error {
	key := r.Message
	for _, a := range h.attrs {
		if a.Key == "component" || a.Key == "unit" {
			key = a.Value.String() + ": " + key
		}
	}
	at := r.Time.Sub(h.t0)
	h.s.mu.Lock()
	if _, ok := h.s.first[key]; !ok {
		h.s.first[key] = at
	}
	h.s.mu.Unlock()
	if r.Level >= slog.LevelError {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *stepLog) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	c.next = h.next.WithAttrs(as)
	return &c
}

func (h *stepLog) WithGroup(name string) slog.Handler {
	c := *h
	c.next = h.next.WithGroup(name)
	return &c
}

// String lists the records in the order they first appeared.
func (h *stepLog) String() string {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	keys := make([]string, 0, len(h.s.first))
	for k := range h.s.first {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return h.s.first[keys[i]] < h.s.first[keys[j]] })
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "\n  %7.0f ms  %s", benchtest.Millis(h.s.first[k]), k)
	}
	return sb.String()
}

// BenchmarkRealPodStart measures stateless busybox pods (`sleep`) from their create call
// to Running and Ready on three real nodes, one at a time ("lone", 10 per op) and 30 at
// once, against the floor: `ctr run -d` of the same image on the nodes' containerds (a
// namespace of its own, image pulled beforehand) until its task is RUNNING, in the same
// op. The 30-concurrent run also reports the process's memory with 3 nodes and 30 pods.
func BenchmarkRealPodStart(b *testing.B) {
	tc := startRealBenchCluster(b)
	others := watchOthers(b, tc.DataDir())
	idle := readMemory()
	floor := newCtrFloor(b, tc)
	for _, concurrent := range []bool{false, true} {
		name := map[bool]string{false: "lone", true: "30-concurrent"}[concurrent]
		b.Run(name, func(b *testing.B) {
			b.StopTimer()
			var pods, ctrs, ctrRunD []time.Duration
			var mem memory
			var cpu, floorCPU cpuUse
			load := loadAverage()
			others.take()
			for i := 0; i < b.N; i++ {
				ns := tc.Namespace(fmt.Sprintf("bench-pods-%s-%d-%d", name, b.N, i))
				tl := newPairTimeline(b, tc, ns, false)
				if concurrent {
					floorCPU = startCPU(tc.DataDir())
					runD, total := floor.runMany(b, 30, &floorCPU)
					ctrs, ctrRunD = append(ctrs, total...), append(ctrRunD, runD...)
					cpu = startCPU(tc.DataDir())
					b.StartTimer()
					pods = append(pods, tl.createAll(b, 30, false)...)
					b.StopTimer()
					cpu.stop()
					mem = readMemory()
				} else {
					for j := 0; j < 10; j++ {
						runD, total := floor.runMany(b, 1, nil)
						ctrs, ctrRunD = append(ctrs, total...), append(ctrRunD, runD...)
						b.StartTimer()
						pods = append(pods, tl.createAll(b, 1, false)...)
						b.StopTimer()
					}
				}
				tl.close()
				tc.deleteNamespace(ns)
			}
			benchtest.ReportLatencies(b, "pod", pods)
			benchtest.ReportLatencies(b, "ctr-run", ctrRunD)
			benchtest.ReportLatencies(b, "ctr-run+ls", ctrs)
			b.ReportMetric(ratio(pods, ctrRunD, 50), "pod-vs-ctr-p50-x")
			b.ReportMetric(ratio(pods, ctrRunD, 99), "pod-vs-ctr-p99-x")
			b.ReportMetric(ratio(pods, ctrs, 50), "pod-vs-ctr+ls-p50-x")
			b.ReportMetric(load, "load1")
			b.ReportMetric(others.take(), "other-real-nodes")
			if concurrent {
				mem.report(b, idle)
				cpu.report(b, "")
				floorCPU.report(b, "ctr-")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkRealClaimPodStart measures PVC + Pod pairs (a 1 GiB gp2 claim, ext4 on a real
// loop device, and a busybox pod mounting it) from the claim's create call to the pod
// Running and Ready on three real nodes, one pair at a time ("lone", 5 per op) and 30 at
// once, with each pair's time split into its steps, against the floor: mkfs.ext4 and
// mount of a 1 GiB loop device, one at a time before each lone pair and 30 at once
// before the 30 pairs. Steps, from the times the benchmark's watches see (see
// pairTimeline): provision (claim created → claim Bound), attach (→ VolumeAttachment
// attached), stage (→ the global mount appears), publish (→ the pod's mount appears),
// containers (→ pod Running and Ready).
func BenchmarkRealClaimPodStart(b *testing.B) {
	tc := startRealBenchCluster(b)
	others := watchOthers(b, tc.DataDir())
	idle := readMemory()
	for _, concurrent := range []bool{false, true} {
		name := map[bool]string{false: "lone", true: "30-concurrent"}[concurrent]
		b.Run(name, func(b *testing.B) {
			b.StopTimer()
			var all []pairTimes
			var floor []time.Duration
			var mem memory
			var cpu cpuUse
			load := loadAverage()
			others.take()
			for i := 0; i < b.N; i++ {
				ns := tc.Namespace(fmt.Sprintf("bench-claims-%s-%d-%d", name, b.N, i))
				tl := newPairTimeline(b, tc, ns, true)
				if concurrent {
					floor = append(floor, mkfsMountFloor(b, 30)...)
					stopProfile := startProfile(b)
					cpu = startCPU(tc.DataDir())
					b.StartTimer()
					tl.createAll(b, 30, true)
					b.StopTimer()
					cpu.stop()
					stopProfile()
					mem = readMemory()
					writeHeapProfile(b)
				} else {
					for j := 0; j < 5; j++ {
						floor = append(floor, mkfsMountFloor(b, 1)...)
						b.StartTimer()
						tl.createAll(b, 1, true)
						b.StopTimer()
					}
				}
				all = append(all, tl.pairs()...)
				tl.close()
				tc.deleteNamespace(ns)
			}
			steps := splitSteps(all)
			for _, s := range stepNames {
				benchtest.ReportLatencies(b, s, steps[s])
			}
			benchtest.ReportLatencies(b, "mkfs-mount", floor)
			b.ReportMetric(ratio(steps["stage+publish"], floor, 50), "stagepub-vs-mkfs-p50-x")
			b.ReportMetric(ratio(steps["total"], floor, 50), "total-vs-mkfs-p50-x")
			b.ReportMetric(load, "load1")
			b.ReportMetric(others.take(), "other-real-nodes")
			if concurrent {
				mem.report(b, idle)
				cpu.report(b, "")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// ratio is the p-th percentile of a over that of b.
func ratio(a, b []time.Duration, p int) float64 {
	pb := benchtest.Percentile(b, p)
	if pb == 0 {
		return 0
	}
	return float64(benchtest.Percentile(a, p)) / float64(pb)
}

// deleteNamespace deletes ns and waits until it is gone with every PersistentVolume its
// claims had, so that the next measurement does not share the machine with the teardown.
func (tc *testCluster) deleteNamespace(ns string) {
	tc.T.Helper()
	ctx := context.Background()
	if err := tc.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		tc.T.Fatal(err)
	}
	testutil.EventuallyWithin(tc.T, 5*time.Minute, "namespace "+ns+" and its volumes gone", func() (bool, error) {
		if _, err := tc.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, nil
		}
		pvs, err := tc.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, pv := range pvs.Items {
			if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == ns {
				return false, nil
			}
		}
		return true, nil
	})
}

// pairTimeline records, for the pods (and their claims, of the same name) of one
// namespace, when each step was first seen, on the benchmark's clock: the create call,
// and then what its informers receive (the pod bound to a node, the PV created for the
// claim, the claim Bound, the VolumeAttachment created and attached, the pod Running and
// Ready) and what the mount table shows (the PV's global mount and the pod's mount of
// it, from a watch of /proc/self/mountinfo: the kubelet and the CSI node plugin run in
// this process's mount namespace). The API's own timestamps (creationTimestamp,
// conditions' lastTransitionTime, startedAt) are whole seconds, too coarse for steps of
// tens of milliseconds.
type pairTimeline struct {
	tc      *testCluster
	ns      string
	mounts  *mountWatch
	stopInf chan struct{}
	factory informers.SharedInformerFactory
	all     informers.SharedInformerFactory

	mu      sync.Mutex
	created map[string]time.Time
	at      map[string]map[string]time.Time // step → pod → time
	pvOf    map[string]string               // claim → PV
	claimOf map[string]string               // PV → claim
	pods    map[string]*corev1.Pod          // last seen
	next    int
}

// The steps pairTimeline sees through the API.
const (
	stepPodBound  = "pod-bound"
	stepPVCreated = "pv-created"
	stepBound     = "claim-bound"
	stepVACreated = "va-created"
	stepAttached  = "va-attached"
	stepRunning   = "running"
)

func newPairTimeline(b *testing.B, tc *testCluster, ns string, claims bool) *pairTimeline {
	b.Helper()
	tl := &pairTimeline{tc: tc, ns: ns, stopInf: make(chan struct{}),
		created: map[string]time.Time{}, at: map[string]map[string]time.Time{},
		pvOf: map[string]string{}, claimOf: map[string]string{}, pods: map[string]*corev1.Pod{}}
	tl.factory = informers.NewSharedInformerFactoryWithOptions(tc.Client, 0, informers.WithNamespace(ns))
	tl.all = informers.NewSharedInformerFactory(tc.Client, 0)
	podSeen := func(o any) {
		p, ok := o.(*corev1.Pod)
		if !ok {
			return
		}
		tl.mu.Lock()
		tl.pods[p.Name] = p
		tl.mu.Unlock()
		if p.Spec.NodeName != "" {
			tl.mark(stepPodBound, p.Name)
		}
		if clustertest.PodRunning(p) {
			tl.mark(stepRunning, p.Name)
		}
	}
	must := func(_ cache.ResourceEventHandlerRegistration, err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(tl.factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: podSeen, UpdateFunc: func(_, o any) { podSeen(o) }}))
	if claims {
		tl.mounts = watchMounts(b, tc.DataDir())
		claimSeen := func(o any) {
			if c, ok := o.(*corev1.PersistentVolumeClaim); ok && c.Status.Phase == corev1.ClaimBound {
				tl.mark(stepBound, c.Name)
			}
		}
		must(tl.factory.Core().V1().PersistentVolumeClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: claimSeen, UpdateFunc: func(_, o any) { claimSeen(o) }}))
		must(tl.all.Core().V1().PersistentVolumes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(o any) {
				pv, ok := o.(*corev1.PersistentVolume)
				if !ok || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Namespace != ns {
					return
				}
				tl.mu.Lock()
				tl.pvOf[pv.Spec.ClaimRef.Name], tl.claimOf[pv.Name] = pv.Name, pv.Spec.ClaimRef.Name
				tl.mu.Unlock()
				tl.mark(stepPVCreated, pv.Spec.ClaimRef.Name)
			}}))
		vaSeen := func(o any) {
			va, ok := o.(*storagev1.VolumeAttachment)
			if !ok || va.Spec.Source.PersistentVolumeName == nil {
				return
			}
			tl.mu.Lock()
			claim, ok := tl.claimOf[*va.Spec.Source.PersistentVolumeName]
			tl.mu.Unlock()
			if !ok {
				return
			}
			tl.mark(stepVACreated, claim)
			if va.Status.Attached {
				tl.mark(stepAttached, claim)
			}
		}
		must(tl.all.Storage().V1().VolumeAttachments().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: vaSeen, UpdateFunc: func(_, o any) { vaSeen(o) }}))
	}
	tl.factory.Start(tl.stopInf)
	tl.all.Start(tl.stopInf)
	tl.factory.WaitForCacheSync(tl.stopInf)
	tl.all.WaitForCacheSync(tl.stopInf)
	return tl
}

func (tl *pairTimeline) close() {
	close(tl.stopInf)
	tl.factory.Shutdown()
	tl.all.Shutdown()
	if tl.mounts != nil {
		tl.mounts.close()
	}
}

func (tl *pairTimeline) mark(step, name string) {
	now := time.Now()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.at[step] == nil {
		tl.at[step] = map[string]time.Time{}
	}
	if _, ok := tl.at[step][name]; !ok {
		tl.at[step][name] = now
	}
}

func (tl *pairTimeline) seen(step, name string) (time.Time, bool) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	t, ok := tl.at[step][name]
	return t, ok
}

// createAll creates n busybox pods (each after its own 1 GiB claim when claims) from n
// goroutines, waits until all run, and returns each one's time from its first create call
// to Running and Ready.
func (tl *pairTimeline) createAll(b *testing.B, n int, claims bool) []time.Duration {
	b.Helper()
	ctx := context.Background()
	tl.mu.Lock()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("p%d", tl.next)
		tl.next++
	}
	tl.mu.Unlock()
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pod := busyboxPod(tl.ns, name, corev1.RestartPolicyAlways, "sleep 3600")
			pod.Spec.Containers[0].Command = []string{"sleep", "3600"}
			tl.mu.Lock()
			tl.created[name] = time.Now()
			tl.mu.Unlock()
			if claims {
				if _, err := tl.tc.Client.CoreV1().PersistentVolumeClaims(tl.ns).Create(ctx, &corev1.PersistentVolumeClaim{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tl.ns},
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
			if _, err := tl.tc.Client.CoreV1().Pods(tl.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	testutil.EventuallyWithin(b, 5*time.Minute, fmt.Sprintf("%d pods of %s Running", n, tl.ns), func() (bool, error) {
		for _, name := range names {
			if _, ok := tl.seen(stepRunning, name); !ok {
				return false, nil
			}
		}
		return true, nil
	})
	out := make([]time.Duration, 0, n)
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for _, name := range names {
		out = append(out, tl.at[stepRunning][name].Sub(tl.created[name]))
	}
	return out
}

// pairTimes are the times of one pair's steps since its claim's create call.
type pairTimes struct {
	bound, attached, staged, published, running time.Duration
}

// pairs are the step times of every pair created so far; the mounts are looked up in
// the mount table's watch by the paths the kubelet uses.
func (tl *pairTimeline) pairs() []pairTimes {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	roots := map[string]string{}
	for _, n := range tl.tc.Nodes() {
		roots[n.Name] = tl.tc.KubeletRoot(n)
	}
	var out []pairTimes
	for name, t0 := range tl.created {
		pod, pv := tl.pods[name], tl.pvOf[name]
		if pod == nil || pv == "" {
			continue
		}
		root := roots[pod.Spec.NodeName]
		staged, okS := tl.mounts.at(stagingPathOf(root, pv))
		published, okP := tl.mounts.at(targetPathOf(root, pod.UID, pv))
		bound, okB := tl.at[stepBound][name]
		attached, okA := tl.at[stepAttached][name]
		running, okR := tl.at[stepRunning][name]
		if !okS || !okP || !okB || !okA || !okR {
			tl.tc.T.Errorf("pair %s: a step was not seen (staged %v, published %v, bound %v, attached %v, running %v)",
				name, okS, okP, okB, okA, okR)
			continue
		}
		out = append(out, pairTimes{
			bound: bound.Sub(t0), attached: attached.Sub(t0),
			staged: staged.Sub(t0), published: published.Sub(t0), running: running.Sub(t0),
		})
	}
	return out
}

// stagingPathOf and targetPathOf are the kubelet's global mount of a PV and a pod's mount
// of it under the kubelet root.
func stagingPathOf(root, pv string) string {
	return filepath.Join(root, "plugins", "kubernetes.io", "csi", "pv", pv, "globalmount")
}

func targetPathOf(root string, pod types.UID, pv string) string {
	return filepath.Join(root, "pods", string(pod), "volumes", "kubernetes.io~csi", pv, "mount")
}

// stepNames are the splits splitSteps makes, in the flow's order, then the whole.
var stepNames = []string{"provision", "attach", "stage", "publish", "stage+publish", "containers", "total"}

// splitSteps turns the pairs' step times into each step's durations.
func splitSteps(pairs []pairTimes) map[string][]time.Duration {
	out := map[string][]time.Duration{}
	for _, p := range pairs {
		for name, d := range map[string]time.Duration{
			"provision": p.bound, "attach": p.attached - p.bound, "stage": p.staged - p.attached,
			"publish": p.published - p.staged, "stage+publish": p.published - p.attached,
			"containers": p.running - p.published, "total": p.running,
		} {
			out[name] = append(out[name], d)
		}
	}
	return out
}

// mountWatch records when each mount point under a prefix first appears in this
// process's mount table, woken by the kernel on every change of the table (poll on
// /proc/self/mountinfo).
type mountWatch struct {
	prefix string
	fd     int
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	first  map[string]time.Time
}

func watchMounts(b *testing.B, prefix string) *mountWatch {
	b.Helper()
	fd, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	w := &mountWatch{prefix: prefix + "/", fd: fd, stop: make(chan struct{}), done: make(chan struct{}), first: map[string]time.Time{}}
	w.scan()
	go func() {
		defer close(w.done)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI | unix.POLLERR}}
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			n, err := unix.Poll(fds, 100)
			if err != nil && !errors.Is(err, unix.EINTR) {
				return
			}
			if n > 0 {
				w.scan()
			}
		}
	}()
	return w
}

// scan reads the mount table and records the mount points seen for the first time.
func (w *mountWatch) scan() {
	now := time.Now()
	if _, err := unix.Seek(w.fd, 0, 0); err != nil {
		return
	}
	var buf bytes.Buffer
	chunk := make([]byte, 64<<10)
	for {
		n, err := unix.Read(w.fd, chunk)
		if n <= 0 || err != nil {
			break
		}
		buf.Write(chunk[:n])
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, line := range strings.Split(buf.String(), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || !strings.HasPrefix(f[4], w.prefix) {
			continue
		}
		if _, ok := w.first[f[4]]; !ok {
			w.first[f[4]] = now
		}
	}
}

func (w *mountWatch) at(path string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.first[path]
	return t, ok
}

func (w *mountWatch) close() {
	close(w.stop)
	<-w.done
	unix.Close(w.fd)
}

// ctrFloor runs busybox containers with Debian's ctr on the nodes' containerds, in a
// namespace of its own, with their cgroups under a parent of its own.
type ctrFloor struct {
	socks  []string
	ns     string
	image  string
	cgroup string
	next   int
}

func newCtrFloor(b *testing.B, tc *testCluster) *ctrFloor {
	b.Helper()
	f := &ctrFloor{ns: fmt.Sprintf("kubelab-bench-%d", os.Getpid()), image: tc.Registry().Addr() + "/library/busybox:latest"}
	f.cgroup = "/" + f.ns
	for _, n := range tc.Nodes() {
		ctrd, err := tc.NodeContainerd(n)
		if err != nil {
			b.Fatal(err)
		}
		sock := strings.TrimPrefix(ctrd.Endpoint(), "unix://")
		f.socks = append(f.socks, sock)
		if out, err := f.ctr(sock, "images", "pull", "--plain-http", f.image); err != nil {
			b.Fatalf("ctr pull on %s: %v\n%s", n.Name, err, out)
		}
	}
	b.Cleanup(func() {
		for _, sock := range f.socks {
			_, _ = f.ctr(sock, "images", "rm", f.image)
			_, _ = f.ctr(sock, "namespaces", "rm", f.ns)
		}
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*" + f.cgroup)
		for _, d := range dirs {
			if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
				b.Errorf("remove cgroup %s: %v", d, err)
			}
		}
	})
	return f
}

func (f *ctrFloor) ctr(sock string, args ...string) ([]byte, error) {
	return exec.Command("ctr", append([]string{"-a", sock, "-n", f.ns}, args...)...).CombinedOutput()
}

// runMany starts n containers at once, spread over the nodes' containerds, and returns
// for each the time of `ctr run -d` and the time until `ctr task ls` shows it RUNNING;
// then it stops cpu (when not nil) and removes them (untimed).
func (f *ctrFloor) runMany(b *testing.B, n int, cpu *cpuUse) (runD, running []time.Duration) {
	b.Helper()
	type ctrRun struct {
		sock, id    string
		runD, total time.Duration
		err         error
		out         []byte
	}
	runs := make([]*ctrRun, n)
	for i := range runs {
		runs[i] = &ctrRun{sock: f.socks[f.next%len(f.socks)], id: fmt.Sprintf("bench-%d", f.next)}
		f.next++
	}
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			r.out, r.err = f.ctr(r.sock, "run", "-d", "--cgroup", f.cgroup+"/"+r.id, f.image, r.id, "sleep", "3600")
			r.runD = time.Since(start)
			for r.err == nil {
				var out []byte
				out, r.err = f.ctr(r.sock, "tasks", "ls")
				if taskRunning(out, r.id) {
					break
				}
				if time.Since(start) > time.Minute {
					r.err = fmt.Errorf("task %s not RUNNING after a minute:\n%s", r.id, out)
				}
			}
			r.total = time.Since(start)
		}()
	}
	wg.Wait()
	if cpu != nil {
		cpu.stop()
	}
	for _, r := range runs {
		// Remove what ran, failed or not.
		_, _ = f.ctr(r.sock, "tasks", "rm", "-f", r.id)
		if out, err := f.ctr(r.sock, "containers", "rm", r.id); err != nil && r.err == nil {
			b.Errorf("ctr containers rm %s: %v\n%s", r.id, err, out)
		}
		if r.err != nil {
			b.Fatalf("ctr run %s: %v\n%s", r.id, r.err, r.out)
		}
		runD, running = append(runD, r.runD), append(running, r.total)
	}
	return runD, running
}

// taskRunning tells whether `ctr tasks ls` lists the task id as RUNNING.
func taskRunning(out []byte, id string) bool {
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == id && f[2] == "RUNNING" {
			return true
		}
	}
	return false
}

// mkfsMountFloor formats and mounts n 1 GiB loop devices at once, as the CSI node plugin
// does (mkfs.ext4 -F -m0, then mount -t ext4 -o defaults), and returns each one's time;
// the loop devices are set up before and removed after, untimed.
func mkfsMountFloor(b *testing.B, n int) []time.Duration {
	b.Helper()
	dir, err := os.MkdirTemp("", "klb-floor")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	type vol struct{ file, dev, mnt string }
	vols := make([]*vol, n)
	defer func() {
		for _, v := range vols {
			if v == nil {
				continue
			}
			_ = unix.Unmount(v.mnt, 0)
			if v.dev != "" {
				if out, err := exec.Command("losetup", "-d", v.dev).CombinedOutput(); err != nil {
					b.Errorf("losetup -d %s: %v %s", v.dev, err, out)
				}
			}
		}
	}()
	for i := range vols {
		v := &vol{file: filepath.Join(dir, "vol"+strconv.Itoa(i)), mnt: filepath.Join(dir, "mnt"+strconv.Itoa(i))}
		vols[i] = v
		if err := os.WriteFile(v.file, nil, 0o600); err != nil {
			b.Fatal(err)
		}
		if err := os.Truncate(v.file, 1<<30); err != nil {
			b.Fatal(err)
		}
		if err := os.Mkdir(v.mnt, 0o700); err != nil {
			b.Fatal(err)
		}
		out, err := exec.Command("losetup", "-f", "--show", v.file).Output()
		if err != nil {
			b.Fatalf("losetup: %v", err)
		}
		v.dev = strings.TrimSpace(string(out))
	}
	out := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, v := range vols {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			if o, err := exec.Command("mkfs.ext4", "-F", "-m0", v.dev).CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("mkfs.ext4 %s: %v %s", v.dev, err, o)
				return
			}
			if o, err := exec.Command("mount", "-t", "ext4", "-o", "defaults", v.dev, v.mnt).CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("mount %s: %v %s", v.dev, err, o)
				return
			}
			out[i] = time.Since(start)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	return out
}

// memory is what the process holds: its resident set (VmRSS), the most it ever held
// (VmHWM), its anonymous and file-backed parts (RssAnon, RssFile: etcd's bbolt file is
// mapped), the Go heap in use (live objects and garbage not yet collected) and, after a
// collection, the live heap alone.
type memory struct{ rss, anon, file, hwm, heap, live uint64 }

// readMemory reads the resident set first, then collects garbage to find the live heap.
func readMemory() memory {
	var m memory
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			m.rss = kb << 10
		case "VmHWM:":
			m.hwm = kb << 10
		case "RssAnon:":
			m.anon = kb << 10
		case "RssFile:":
			m.file = kb << 10
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.heap = ms.HeapInuse
	runtime.GC()
	runtime.ReadMemStats(&ms)
	m.live = ms.HeapAlloc
	return m
}

func (m memory) report(b *testing.B, idle memory) {
	const mb = 1 << 20
	b.ReportMetric(float64(m.rss)/mb, "rss-MB")
	b.ReportMetric(float64(m.anon)/mb, "rss-anon-MB")
	b.ReportMetric(float64(m.file)/mb, "rss-file-MB")
	b.ReportMetric(float64(m.hwm)/mb, "rss-peak-MB")
	b.ReportMetric(float64(m.heap)/mb, "heap-inuse-MB")
	b.ReportMetric(float64(m.live)/mb, "heap-live-MB")
	b.ReportMetric(float64(idle.rss)/mb, "rss-idle-MB")
	b.ReportMetric(float64(idle.live)/mb, "heap-live-idle-MB")
}

// cpuUse is the CPU time spent over a span: by this process (the cluster's Go code), by
// the programs it ran and waited for (mkfs.ext4, mount, losetup, …), by the nodes'
// containerds and shims (processes whose command line names the data dir, with the
// children they waited for: runc, CNI plugins), and by the whole machine, other
// engineers' work included.
type cpuUse struct {
	dataDir                     string
	start                       time.Time
	self0, children0, nodes0    time.Duration
	host0                       time.Duration
	wall, self, children, nodes time.Duration
	host                        time.Duration
	nodePIDs0                   map[int]time.Duration
}

func startCPU(dataDir string) cpuUse {
	c := cpuUse{dataDir: dataDir, start: time.Now(), self0: rusage(unix.RUSAGE_SELF),
		children0: rusage(unix.RUSAGE_CHILDREN), host0: hostCPU()}
	c.nodePIDs0 = procsCPU(dataDir + "/")
	return c
}

func (c *cpuUse) stop() {
	c.wall, c.self, c.children = time.Since(c.start), rusage(unix.RUSAGE_SELF)-c.self0, rusage(unix.RUSAGE_CHILDREN)-c.children0
	c.host = hostCPU() - c.host0
	for pid, d := range procsCPU(c.dataDir + "/") {
		c.nodes += d - c.nodePIDs0[pid]
	}
}

// report reports the times as <prefix>self-cpu-s and so on.
func (c cpuUse) report(b *testing.B, prefix string) {
	b.ReportMetric(c.self.Seconds(), prefix+"self-cpu-s")
	b.ReportMetric(c.children.Seconds(), prefix+"children-cpu-s")
	b.ReportMetric(c.nodes.Seconds(), prefix+"containerd-cpu-s")
	b.ReportMetric(c.host.Seconds(), prefix+"host-cpu-s")
	b.ReportMetric(c.wall.Seconds(), prefix+"wall-s")
}

func rusage(who int) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procsCPU is the CPU time (with that of the children they waited for) of each process
// whose command line contains s.
func procsCPU(s string) map[int]time.Duration {
	out := map[int]time.Duration{}
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cmdlines {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(b, []byte(s)) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if pid == os.Getpid() {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(filepath.Dir(f), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: state is the first, utime,
		// stime, cutime, cstime the 12th to 15th.
		_, rest, ok := bytes.Cut(stat, []byte(") "))
		fs := strings.Fields(string(rest))
		if !ok || len(fs) < 15 {
			continue
		}
		var ticks int64
		for _, v := range fs[11:15] {
			n, _ := strconv.ParseInt(v, 10, 64)
			ticks += n
		}
		out[pid] = time.Duration(ticks) * time.Second / 100 // USER_HZ
	}
	return out
}

// hostCPU is the busy time of all the machine's CPUs (everything but idle and iowait).
func hostCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i == 3 || i == 4 || i >= 7 { // idle, iowait, steal; guest times are in user already
			continue
		}
		busy += n
	}
	return time.Duration(busy) * time.Second / 100 // USER_HZ
}

// loadAverage is the machine's one-minute load average.
func loadAverage() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// startProfile starts a CPU profile into $KUBELAB_BENCH_CPUPROFILE when set; the
// function it returns stops it.
func startProfile(b *testing.B) func() {
	path := os.Getenv("KUBELAB_BENCH_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// writeHeapProfile writes a heap profile into $KUBELAB_BENCH_MEMPROFILE when set.
func writeHeapProfile(b *testing.B) {
	path := os.Getenv("KUBELAB_BENCH_MEMPROFILE")
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}
